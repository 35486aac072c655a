#!/usr/bin/env bash
# The layering of the includes (cmake/layers.txt, decision 0081): a file may include
# `x/...` only from its own folder or from a folder its folder's line names (a file named
# *test* also from those after `|`). Prints each violation with the file, the line and the
# folder pair; fails on any. A source folder missing from the table fails too.
# Usage: layers.sh SOURCE_DIR [TABLE]   (TABLE: SOURCE_DIR/cmake/layers.txt)
set -uo pipefail
root=$1
table=$(realpath "${2:-$root/cmake/layers.txt}")
cd "$root" || exit 2
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  files=$(git ls-files --cached --others --exclude-standard '*.cc' '*.h' | grep -v '^build/')
else
  files=$(find . -path ./build -prune -o \( -name '*.cc' -o -name '*.h' \) -print | sed 's|^\./||')
fi
# Each file once with no include (so that its folder is checked), then its includes.
{
  for file in $files; do echo "$file:0:"; done
  # shellcheck disable=SC2086
  grep -HnE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' $files
} | awk -v table="$table" '
  # The listed folder that a path lies in: the longest listed prefix ("" when none).
  function layer_of(path,   f, best) {
    best = ""
    for (f in listed)
      if ((path == f || index(path, f "/") == 1) && length(f) > length(best)) best = f
    return best
  }
  function dir_of(path) { return sub(/\/[^\/]*$/, "", path) ? path : "." }
  BEGIN {
    while ((getline line < table) > 0) {
      if (line ~ /^[ \t]*(#|$)/) continue
      if (line !~ /^[a-z0-9\/_]+:[^|]*(\|.*)?$/) { print table ": cannot read the line \"" line "\""; bad = 1; exit 2 }
      folder = line; sub(/:.*/, "", folder)
      rest = line; sub(/^[^:]*:/, "", rest)
      code = rest; sub(/\|.*/, "", code)
      tests = (rest ~ /\|/) ? rest : ""; sub(/^[^|]*\|/, "", tests)
      listed[folder] = 1
      deps[folder] = " " folder " " code " "
      testDeps[folder] = " " tests " "
    }
    status = 0
  }
  {
    file = $0; sub(/:.*/, "", file)
    rest = $0; sub(/^[^:]*:/, "", rest)
    lineNo = rest; sub(/:.*/, "", lineNo)
    dir = dir_of(file)
    if (!(dir in folderOf)) folderOf[dir] = layer_of(dir)
    folder = folderOf[dir]
    if (folder == "") {
      if (!(dir in missing)) { print file ": its folder " dir "/ is not in cmake/layers.txt"; missing[dir] = 1; status = 1 }
      next
    }
    if (lineNo == 0) next
    include = rest; sub(/^[^"]*"/, "", include); sub(/".*/, "", include)
    if (include !~ /\//) next
    idir = dir_of(include)
    target = layer_of(idir); if (target == "") target = idir
    allowed = deps[folder]
    n = split(file, parts, "/"); if (parts[n] ~ /test/) allowed = allowed testDeps[folder]
    if (index(allowed " ", " " target " ") == 0) {
      print file ":" lineNo ": includes " include ": " folder "/ may not depend on " target "/ (cmake/layers.txt)"
      status = 1
    }
  }
  END {
    if (bad) exit 2
    if (status == 0) print "every include follows the layering of cmake/layers.txt"
    exit status
  }'
