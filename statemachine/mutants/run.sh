#!/usr/bin/env bash
# Runs each mutant of the quorum rules (statemachine_test-<mutant>: the patched file's
# tests, quorum_test.cc or peer_quorum_test.cc, built with the patched file) and reports the tests that catch it. Exit status 1 if a
# mutant survives (every test passes). Usage: run.sh BUILD_DIR MUTANT_BINARY...
set -uo pipefail
dir=$1
shift
survivors=0
printf '%-28s %s\n' mutant "caught by"
for bin in "$@"; do
  name=${bin#statemachine_test-}
  if out=$("$dir/$bin" --gtest_brief=1 2>&1); then
    printf '%-28s %s\n' "$name" "SURVIVED its tests"
    survivors=$((survivors + 1))
  else
    failed=$(grep -E '^\[  FAILED  \] [A-Za-z]' <<<"$out" | sed -E 's/^\[  FAILED  \] ([^ ]+).*/\1/' | paste -sd' ')
    printf '%-28s %s\n' "$name" "${failed:-a crash}"
  fi
done
[ "$survivors" -eq 0 ]
