#!/usr/bin/env bash
# Runs every dugong test: installs what is missing, builds, and runs the whole suite
# twice (a plain build, then AddressSanitizer + UndefinedBehaviorSanitizer), then
# measures statemachine/ line coverage. Exits non-zero on the first failure.
#
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh --quick    plain build only, no sanitizers, no coverage
#   DUGONG_TEST_LABELS=statemachine|sim|scenario|zk|pg|agent|adm|e2e  only those ctest labels (regex)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

quick=0
for arg in "$@"; do
  case "$arg" in
    --quick) quick=1 ;;
    *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
  esac
done

bash scripts/install-deps.sh
jobs=$(nproc)
labels=${DUGONG_TEST_LABELS:-}
ctest_args=(--output-on-failure --timeout 900)
[ -n "$labels" ] && ctest_args+=(-L "$labels")

if [ -d ../shared/conformance/manatee ]; then
  echo "== Manatee conformance scenarios: ../shared/conformance/manatee (run as ctest label 'scenario')"
else
  echo "== Manatee conformance scenarios: ../shared/conformance/manatee not found beside the checkout; not run"
fi

run_suite() {  # name, build dir, extra cmake args...
  local name=$1 dir=$2
  shift 2
  echo "== $name: configure and build ($dir)"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
  ninja -C "$dir" -j "$jobs"
  echo "== $name: tests"
  (cd "$dir" && ctest "${ctest_args[@]}" -j "$jobs")
}

run_suite "plain" build/test
if [ "$quick" = 1 ]; then exit 0; fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
run_suite "sanitizers (ASan+UBSan)" build/asan -DDUGONG_SANITIZE=ON

echo "== coverage of statemachine/"
cmake -S . -B build/coverage -G Ninja -DCMAKE_BUILD_TYPE=Debug -DDUGONG_COVERAGE=ON -DDUGONG_ONLY_STATEMACHINE=ON >/dev/null
ninja -C build/coverage -j "$jobs"
find build/coverage -name '*.gcda' -delete
(cd build/coverage && ctest --output-on-failure -j "$jobs" -L 'statemachine|scenario' >/dev/null)
gcovr --root "$root" --filter "$root/statemachine/" --exclude '.*_test\.cc' \
  --object-directory build/coverage --print-summary --fail-under-line 95 -s build/coverage | tail -4
echo "== all tests passed"
