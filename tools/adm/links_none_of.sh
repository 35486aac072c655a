#!/usr/bin/env bash
# Fails when BINARY defines any strong symbol that ARCHIVE's objects (the driver's
# library: driver/driver.cc, alone or in a unity batch) define: i.e. when driver code is
# linked in.
# Usage: links_none_of.sh BINARY ARCHIVE
set -euo pipefail
binary=$1
archive=$2
# nm -A: "archive:member:address type name"; strong definitions only (weak ones, W/V,
# are inline functions and templates that any user of the same headers may emit too).
driver_symbols=$(nm -A --defined-only "$archive" |
                 awk '$2 ~ /^[TDBR]$/ {print $3}' | sort -u)
if [ -z "$driver_symbols" ]; then
  echo "no driver symbols found in $archive: the check would pass whatever is linked" >&2
  exit 2
fi
linked=$(nm --defined-only "$binary" | awk '{print $3}' | sort -u | comm -12 - <(echo "$driver_symbols"))
if [ -n "$linked" ]; then
  echo "$binary links driver code; it defines:" >&2
  echo "$linked" | c++filt | head -20 >&2 || true
  exit 1
fi
echo "$binary defines none of the $(echo "$driver_symbols" | wc -l) symbols of the driver's objects"
