#!/usr/bin/env bash
# expect_failure.sh TIMEOUT REGEX COMMAND...
# Passes when COMMAND exits non-zero on its own (not killed by TIMEOUT) and its
# combined output matches REGEX (grep -E). Prints the output and elapsed time.
set -u
timeout_s=$1; regex=$2; shift 2
start=$(date +%s%N)
out=$(timeout --kill-after=5 "$timeout_s" "$@" 2>&1)
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf '%s\n' "$out" | tail -n 40
echo "--- exit code $rc after ${elapsed_ms}ms"
# Judge a hang by the clock: mpirun itself exits 137 when a rank was SIGKILLed.
if [ "$rc" -eq 124 ] || { [ "$rc" -eq 137 ] && [ "$elapsed_ms" -ge $((timeout_s * 1000)) ]; }; then
  echo "FAIL: command hung and was killed after ${timeout_s}s"; exit 1
fi
if [ "$rc" -eq 0 ]; then
  echo "FAIL: command succeeded, expected a non-zero exit"; exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$regex"; then
  echo "FAIL: output does not match /$regex/"; exit 1
fi
echo "PASS: failed as expected"
