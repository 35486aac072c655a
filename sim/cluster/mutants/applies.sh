#!/usr/bin/env bash
# Checks that every mutant patch still applies to the source it mutates, so that a change
# of the code around a safety step cannot leave its mutant unbuildable until the next
# `ninja mutation_test`. Usage: applies.sh SOURCE_DIR PATCH...
set -uo pipefail
src=$1
shift
stale=0
for p in "$@"; do
  if ! out=$(patch -s --dry-run -d "$src" -p1 <"$p" 2>&1); then
    echo "mutant $(basename "$p" .patch) no longer applies: $out"
    stale=$((stale + 1))
  fi
done
[ "$stale" -eq 0 ] || { echo "$stale mutant patch(es) to update: make the same change to the code as it is now"; exit 1; }
echo "$# mutant patches apply"
