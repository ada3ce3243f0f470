#!/usr/bin/env bash
# lint_scripts.sh SCRIPT...: bash -n on each script, then shellcheck where it is
# installed. Without shellcheck the syntax check still runs, and the test
# reports skipped (77) so that a missing linter is visible, not a silent pass.
set -uo pipefail
fail=0
for f in "$@"; do
  bash -n "$f" || { echo "FAIL: bash -n $f"; fail=1; }
done
[ "$fail" -eq 0 ] || exit 1
echo "bash -n: $# script(s) parse"
if ! command -v shellcheck >/dev/null; then
  echo "SKIPPED: shellcheck is not installed (apt-get install shellcheck)"; exit 77
fi
shellcheck -x -S warning "$@" || { echo "FAIL: shellcheck"; exit 1; }
echo "shellcheck: $# script(s) clean"
