#!/usr/bin/env bash
# cmake/layers.sh finds an include that breaks the layering, names the file, the line and
# the folder pair, and passes a tree that keeps it. Usage: layers_test.sh LAYERS_SH
set -uo pipefail
check=$1
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/low" "$dir/high" "$dir/cmake"
printf 'low:\nhigh: low\n' >"$dir/cmake/layers.txt"
printf '#include "low/a.h"\n' >"$dir/high/b.h"
printf '#pragma once\n' >"$dir/low/a.h"
if ! out=$(bash "$check" "$dir"); then
  echo "a tree that keeps the layering was refused: $out"
  exit 1
fi
printf '#pragma once\n#include "high/b.h"\n' >"$dir/low/a.h"
if out=$(bash "$check" "$dir"); then
  echo "low/a.h including high/b.h passed: $out"
  exit 1
fi
expected='low/a.h:2: includes high/b.h: low/ may not depend on high/ (cmake/layers.txt)'
if [[ $out != *"$expected"* ]]; then
  echo "expected \"$expected\", got: $out"
  exit 1
fi
echo "a planted include against the layering is found: $expected"
