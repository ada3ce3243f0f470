#!/usr/bin/env bash
# One run per output directory (run_lock.h). Two jobs on one --logdir or
# --ckpt-dir both ran and exited 0, interleaving metrics.jsonl and overwriting
# each other's checkpoints. Now:
#   1. a second job on a busy --logdir, or on a busy --ckpt-dir, is refused
#      with exit 2, naming the flag and the holder's host and pid;
#   2. the first job is untouched: it ends with exit 0 and valid metrics;
#   3. a lock left by a job that died (SIGKILL) is taken over, saying whose it
#      was, and a finished run leaves no lock file;
#   4. a holder on another host is waited for (a lost node's lease), then named.
source "$(dirname "$0")/lib.sh"
slow=(env RINGTRAIN_FAULT_STEP_DELAY_MS=100)
a=$WORK/a
mkdir -p "$a"
"${MPIRUN[@]}" -np 2 -x RINGTRAIN_FAULT_STEP_DELAY_MS=100 "$RINGTRAIN_EXE" train --data "$DATA" \
  --model "$MLP" --batch 8 --max-steps 150 --epochs 100 --log-every 1 --logdir "$a" \
  --ckpt-dir "$a/ckpt" --ckpt-every 10 --timeout 60 --device cpu >"$a/log.txt" 2>&1 &
first=$!
for _ in $(seq 1 300); do
  [ -s "$a/metrics.jsonl" ] && break
  sleep 0.1
done
[ -s "$a/metrics.jsonl" ] || { cat "$a/log.txt"; fail "the first job did not start"; }
holder=$(cat "$a/.ringtrain.lock")
grep -Eq "^host $(hostname) pid [0-9]+ since " <<<"$holder" || fail "the lock does not name its holder: $holder"
pid=$(sed -E 's/.* pid ([0-9]+) .*/\1/' <<<"$holder")
kill -0 "$pid" || fail "the lock names pid $pid, which is not running"

second() {  # NAME FLAGS...: a second job must be refused (exit 2), naming the holder
  local name=$1 rc=0
  shift
  mkdir -p "$WORK/$name"
  timeout -k 5 120 "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$DATA" --model "$MLP" \
    --batch 8 --max-steps 5 --timeout 60 --device cpu "$@" >"$WORK/$name/log.txt" 2>&1 || rc=$?
  [ "$rc" -eq 2 ] || { cat "$WORK/$name/log.txt"; fail "$name: exit code $rc, expected 2"; }
  grep -q "is in use by another run (host $(hostname) pid $pid since" "$WORK/$name/log.txt" \
    || { cat "$WORK/$name/log.txt"; fail "$name: the holder is not named"; }
  echo "ok: $name: $(grep -m1 -o "\-\-[a-z-]* .* is in use by another run ([^)]*)" "$WORK/$name/log.txt")"
}
second same_logdir --logdir "$a" --ckpt-dir "$WORK/other-ckpt"
grep -q "^--logdir $a is in use" <(grep -o "\-\-logdir .*" "$WORK/same_logdir/log.txt") || fail "same_logdir: not --logdir"
second same_ckpt_dir --logdir "$WORK/other-logs" --ckpt-dir "$a/ckpt"
grep -q "\-\-ckpt-dir $a/ckpt is in use" "$WORK/same_ckpt_dir/log.txt" || fail "same_ckpt_dir: not --ckpt-dir"

rc=0
wait "$first" || rc=$?
[ "$rc" -eq 0 ] || { cat "$a/log.txt"; fail "the first job: exit code $rc"; }
"$PYTHON" - "$a/metrics.jsonl" <<'PY' || fail "the first job's metrics.jsonl"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["step"] for r in rows if r.get("kind") == "train"]
assert steps == list(range(1, 151)), steps
PY
[ ! -e "$a/.ringtrain.lock" ] || fail "a finished run left its lock file"
[ "$(ls "$a"/ckpt/ckpt-*.h5 | sort -V | tail -1)" = "$a/ckpt/ckpt-150.h5" ] || fail "the first job's checkpoints"
echo "ok: the first job ran to the end undisturbed and removed its lock"

# A job killed outright leaves its lock file; the next run takes it over.
b=$WORK/b
mkdir -p "$b"
"${slow[@]}" "$RINGTRAIN_EXE" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 1000 --epochs 100 \
  --log-every 1 --logdir "$b" --timeout 60 --device cpu >"$b/log.txt" 2>&1 &
killed=$!
for _ in $(seq 1 300); do
  [ -s "$b/metrics.jsonl" ] && break
  sleep 0.1
done
[ -s "$b/metrics.jsonl" ] || { cat "$b/log.txt"; fail "the job to kill did not start"; }
kill -KILL "$killed"
wait "$killed" 2>/dev/null || true
grep -q "pid $killed " "$b/.ringtrain.lock" || fail "the killed job's lock file: $(cat "$b/.ringtrain.lock")"
train 1 "$b" --model "$MLP" --batch 8 --max-steps 3
grep -q "taking over the run lock of a run that is no longer running (host $(hostname) pid $killed since" "$b/log.txt" \
  || { cat "$b/log.txt"; fail "the stale lock was not taken over by name"; }
[ ! -e "$b/.ringtrain.lock" ] || fail "the run that took over left its lock file"
echo "ok: a stale lock (pid $killed, killed) was taken over"

# A holder on another host may be a lost node whose lock a file server keeps
# until its lease runs out: waited for (up to half of --timeout), then refused.
c=$WORK/c
mkdir -p "$c"
"$PYTHON" - "$c/.ringtrain.lock" "$c/held" <<'HOLD' &
import fcntl, sys, time
f = open(sys.argv[1], "a+")
fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
f.write("host elsewhere-60 pid 4242 since 2026-01-01T00:00:00Z\n")
f.flush()
open(sys.argv[2], "w").close()
time.sleep(60)
HOLD
holder_pid=$!
for _ in $(seq 1 100); do [ -e "$c/held" ] && break; sleep 0.1; done
rc=0
timeout -k 5 60 "$RINGTRAIN_EXE" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 2 --logdir "$c" \
  --timeout 4 --device cpu >"$c/log.txt" 2>&1 || rc=$?
kill "$holder_pid" 2>/dev/null || true
wait "$holder_pid" 2>/dev/null || true
[ "$rc" -eq 2 ] || { cat "$c/log.txt"; fail "other host: exit code $rc, expected 2"; }
grep -q "waiting up to 2 s for the run lock of host elsewhere-60 pid 4242" "$c/log.txt" \
  || { cat "$c/log.txt"; fail "other host: no word on the wait"; }
grep -q "is in use by another run (host elsewhere-60 pid 4242 since" "$c/log.txt" \
  || { cat "$c/log.txt"; fail "other host: the holder is not named"; }
echo "ok: a holder on another host was waited for, then named"
echo "PASS"
