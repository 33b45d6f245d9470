#!/usr/bin/env bash
# Lists the functions of the product code longer than a limit (docs/CONTRIBUTING.md:
# 150 lines), longest first, as "LINES FILE:LINE NAME"; exits 1 if there is one.
# Needs Universal Ctags (Debian: universal-ctags).
#   usage: scripts/long_functions.sh [LIMIT [DIR…]]   (default: 150, the product code's directories)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
limit=${1:-150}
shift || true
dirs=("$@")
if [ ${#dirs[@]} -eq 0 ]; then
  for d in include src stores statemachine tools adapters; do
    if [ -d "$d" ]; then dirs+=("$d"); fi
  done
fi
long=$(ctags --languages=C++ --c++-kinds=f --fields=+ne -o - -R "${dirs[@]}" |
  awk -F'\t' -v limit="$limit" '{
    line = ""; end = ""
    for (i = 4; i <= NF; i++) {
      if ($i ~ /^line:/) line = substr($i, 6)
      if ($i ~ /^end:/) end = substr($i, 5)
    }
    if (end != "" && end - line + 1 > limit) print end - line + 1, $2 ":" line, $1
  }' | sort -rn)
[ -z "$long" ] && exit 0
echo "$long"
exit 1
