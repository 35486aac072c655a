#!/usr/bin/env bash
# The file tables of docs/README.md and docs/architecture.md name files that exist: each
# `path` in a table row (a name with a file ending, a glob, or a folder ending in /) is
# looked for from the top of the tree, then in the folder its row is about (the first
# cell's folder; in architecture.md's "The driver", driver/). Usage: table_paths.sh ROOT
set -uo pipefail
root=$1
cd "$root" || exit 2
status=0
checked=0
for page in docs/README.md docs/architecture.md; do
  section=""
  while IFS= read -r line; do
    [[ $line == "## "* ]] && section=${line#\#\# }
    [[ $line == "|"* ]] || continue
    [[ $line == "|---"* ]] && continue
    firstCell=$(cut -d'|' -f2 <<<"$line")
    base=""
    [[ $firstCell =~ \`([a-z0-9_/]+/)\` ]] && base=${BASH_REMATCH[1]}
    [[ $section == "The driver" ]] && base=driver/
    while IFS= read -r path; do
      [[ $path =~ ^[A-Za-z0-9_./*-]+$ ]] || continue
      [[ $path == /* || $path == *..* ]] && continue
      [[ $path =~ (\.(h|cc|md|txt|sh|yaml|cfg|jsonl|patch|8|1|\*)|\*.*|/)$ ]] || continue
      checked=$((checked + 1))
      found=""
      for candidate in "$path" "$base$path"; do
        # shellcheck disable=SC2086
        if compgen -G "$candidate" >/dev/null || [ -e "$candidate" ]; then found=yes; break; fi
      done
      # A page linked from the table is relative to docs/.
      [[ -z $found && $path == *.md ]] && [ -e "docs/$path" ] && found=yes
      if [[ -z $found ]]; then
        echo "$page (\"$section\"): \`$path\` names no file (looked in ./ ${base:+and $base})"
        status=1
      fi
    done < <(grep -oE '`[^`]+`' <<<"$line" | tr -d '`')
  done <"$page"
done
[ "$status" -eq 0 ] && echo "the $checked paths the tables of docs/README.md and docs/architecture.md name exist"
exit "$status"
