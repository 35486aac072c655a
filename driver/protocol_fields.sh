#!/usr/bin/env bash
# Checks that each protocol's file alone changes its fields (docs/driver.md, decision
# 0077): a protocol's private fields are written `object_.field_`, and only its own file
# names them; the other files ask its queries. Usage: protocol_fields.sh DRIVER_DIR
set -uo pipefail
dir=$1
status=0
while read -r object owner; do
  if hits=$(grep -nE "\\b${object}\\.[a-zA-Z]+_\\b" "$dir"/*.cc "$dir"/*.h | grep -v "^$dir/$owner:"); then
    echo "the fields of ${object} are named outside ${owner}:"
    echo "$hits"
    status=1
  fi
done <<'TABLE'
lease_ lease.cc
failsafe_ core_failsafe.cc
isolation_ isolated_primary.cc
health_ health.cc
handover_ handover.cc
rejoin_ rejoin.cc
dataState_ rejoin.cc
syncWatch_ sync_watch.cc
reports_ reports.cc
TABLE
[ "$status" -eq 0 ] && echo "each protocol's fields are named only by its own file"
exit "$status"
