#!/usr/bin/env bash
# count_lines.sh REGEX N < text: passes when exactly N lines match REGEX (grep -E).
set -uo pipefail
n=$(grep -Ec -- "$1")
[ "$n" -eq "$2" ] && { echo "count_lines: $n line(s) match /$1/"; exit 0; }
echo "count_lines: $n line(s) match /$1/, expected $2"
exit 1
