#!/usr/bin/env bash
# expect_output.sh REGEX COMMAND...
# Passes when COMMAND exits 0 and its combined output matches REGEX (Python's
# re, with . matching newlines, as CTest's pass-regex property does). Unlike
# that property, which makes CTest ignore the exit code, a crash after the
# expected output fails. Prints the output's tail and the exit code.
set -u
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/python.sh"  # PYTHON: the tests' one Python
regex=$1
shift
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out" | tail -n 60
echo "--- exit code $rc"
[ "$rc" -eq 0 ] || { echo "FAIL: exit code $rc, expected 0"; exit 1; }
printf '%s' "$out" | "$PYTHON" -c 'import re, sys; sys.exit(0 if re.search(sys.argv[1], sys.stdin.read(), re.S) else 1)' "$regex" \
  || { echo "FAIL: output does not match /$regex/"; exit 1; }
echo "PASS: exit 0 and the expected output"
