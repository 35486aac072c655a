#!/usr/bin/env bash
# Runs each mutant of dugong-cluster-sim over the default seed budget (the seeds of the
# cluster_sim_seeds tests, then the regression seeds of the cluster_sim_seed tests) and
# reports the first seed that catches it, with the fault; a mutant of a driver/ file that
# they miss is then run as driver_test-<mutant> (the driver's transcripts and gtests).
# Exit status 1 if a mutant survives. Usage: run.sh BUILD_DIR MUTANT_BINARY...
set -uo pipefail
dir=$1
shift
seeds=${DUGONG_MUTANT_SEEDS:-1..10000}
jobs=${DUGONG_MUTANT_JOBS:-$(nproc)}
survivors=0
printf '%-32s %-8s %s\n' mutant seed fault
for bin in "$@"; do
  name=${bin#dugong-cluster-sim-}
  out=$("$dir/$bin" --seeds "$seeds" --jobs "$jobs" --no-shrink --stop-at-first-failure 2>&1)
  first=$(grep -m1 -E '^seed [0-9]+ FAILED' <<<"$out")
  for s in ${DUGONG_MUTANT_REGRESSION_SEEDS:-}; do
    [ -n "$first" ] && break
    out=$("$dir/$bin" --seed "$s" --no-shrink 2>&1)
    first=$(grep -m1 -E '^seed [0-9]+ FAILED' <<<"$out")
  done
  # A mutant of a driver/ file the seeds miss: driver_test (transcripts and gtests) with
  # the patched file, which the test command runs too.
  if [ -z "$first" ] && [ -x "$dir/driver_test-$name" ]; then
    if ! out=$("$dir/driver_test-$name" --gtest_brief=1 2>&1); then
      failed=$(grep -m1 -E '^\[  FAILED  \] [A-Za-z]' <<<"$out" | sed -E 's/^\[  FAILED  \] //')
      printf '%-32s %-8s %s\n' "$name" "driver" "driver_test: ${failed:-failed}"
      continue
    fi
  fi
  if [ -z "$first" ]; then
    printf '%-32s %-8s %s\n' "$name" "-" "SURVIVED seeds $seeds ${DUGONG_MUTANT_REGRESSION_SEEDS:-} and driver_test"
    survivors=$((survivors + 1))
  else
    seed=$(sed -E 's/^seed ([0-9]+) FAILED: .*/\1/' <<<"$first")
    fault=$(sed -E 's/^seed [0-9]+ FAILED: //' <<<"$first" | cut -c1-160)
    printf '%-32s %-8s %s\n' "$name" "$seed" "$fault"
  fi
done
[ "$survivors" -eq 0 ] || { echo "$survivors mutant(s) survived"; exit 1; }
echo "every mutant was caught"
