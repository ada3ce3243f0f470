# shellcheck shell=bash
# Shared by the tests/eval scripts (sourced). Each script gets its own work
# directory; the fixture (make_eval_fixture.sh) is read-only to them.
set -euo pipefail
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# json_check FILE PYTHON: runs PYTHON with `j` bound to the parsed FILE; an
# AssertionError (or any error) fails the test with its message.
json_check() {
  "$PYTHON" - "$1" "$2" <<'PY' || fail "check on $1 failed"
import json, sys
j = json.load(open(sys.argv[1]))
exec(sys.argv[2])
PY
}

# The trainer's own evaluation records (LOGDIR/metrics.jsonl) as "step accuracy n" lines.
trainer_evals() {
  "$PYTHON" - "$1" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("kind") == "eval":
        print(r["step"], repr(r["accuracy"]), r["n"], repr(r["loss"]))
PY
}

# wait_for_line FILE REGEX SECONDS: until FILE has a line matching REGEX.
wait_for_line() {
  local deadline=$((SECONDS + $3))
  until grep -Eq -- "$2" "$1" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || { cat "$1"; fail "no line matching /$2/ in $1 after $3 s"; }
    sleep 0.1
  done
}

# describe_tree PID: PID and its descendants with the signals each blocks,
# catches and has pending (/proc's hex masks; bit n-1 is signal n: SIGUSR1 is
# 0x200, SIGTERM 0x4000), and the Open MPI settings of the environment: what a
# stop that never arrived needs to be explained (eval_watch_sigTERM on GPU hosts).
describe_tree() {
  local p kids
  echo "--- process tree of $1 (pid ppid stat command; SigBlk SigCgt SigPnd ShdPnd):"
  for p in $1 $(pgrep -P "$1") $(for k in $(pgrep -P "$1"); do pgrep -P "$k"; done); do
    [ -r "/proc/$p/status" ] || continue
    kids=$(awk '/^(SigBlk|SigCgt|SigPnd|ShdPnd):/ {printf "%s %s ", $1, $2}' "/proc/$p/status")
    echo "$(ps -o pid=,ppid=,stat=,comm= -p "$p") $kids"
  done
  env | grep -E '^(OMPI_MCA|PMIX_MCA|OMPI_)' | sort | sed 's/^/env: /'
}

# wait_for_exit PID SECONDS: sets `rc` to the exit code of background job PID
# (not in a subshell: only this shell can wait for its children); fails the
# test (killing the job) if it is still running after SECONDS.
# shellcheck disable=SC2034  # rc is read by the caller
wait_for_exit() {
  local deadline=$((SECONDS + $2))
  while kill -0 "$1" 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      describe_tree "$1" >&2
      kill -KILL "$1" 2>/dev/null || true
      fail "process $1 still running after $2 s"
    fi
    sleep 0.1
  done
  rc=0
  wait "$1" || rc=$?
}

# Steps of the records in a metrics.jsonl file, space-separated, in file order.
record_steps() {
  "$PYTHON" -c 'import json,sys; print(" ".join(str(json.loads(l)["step"]) for l in open(sys.argv[1]) if l.strip()))' "$1"
}
