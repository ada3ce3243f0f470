#!/usr/bin/env bash
# eval_watch_signal.sh FIXTURE WORK SIGNAL RINGTRAIN
# A watcher idling between looks (a long --interval) and one busy evaluating
# both stop promptly and cleanly on SIGNAL: exit 0 and a message naming it;
# for TERM, so does a 2-rank watcher under launch/ringtrain-mpirun.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/eval_test_lib.sh"
fixture=$1 work=$2 sig=$3 exe=$4
rm -rf "$work" && mkdir -p "$work/ckpt"

# Idle: nothing to evaluate, 1 hour to the next look.
"$exe" eval --device cpu --watch "$work/ckpt" --data "$fixture/d.h5" --interval 3600 </dev/null >"$work/idle.log" 2>&1 &
pid=$!
wait_for_line "$work/idle.log" "watching " 60
start=$SECONDS
kill -"$sig" "$pid"
wait_for_exit "$pid" 15
cat "$work/idle.log"
[ "$rc" -eq 0 ] || fail "idle watcher exited $rc on SIG$sig"
grep -q "stopped by SIG$sig after 0 evaluation(s)" "$work/idle.log" || fail "no stop message"
echo "idle watcher stopped $((SECONDS - start)) s after SIG$sig"

# Two ranks under launch/ringtrain-mpirun, which turns a SIGTERM into SIGUSR1
# for the ranks (plain mpirun would kill them 1 s later and exit non-zero).
if [ "$sig" = TERM ]; then
  launcher=$(cd "$(dirname "$0")/../../launch" && pwd)/ringtrain-mpirun
  RINGTRAIN_EXE=$exe "$launcher" -n 2 --oversubscribe eval --device cpu --watch "$work/ckpt" --data "$fixture/d.h5" \
    --interval 3600 </dev/null >"$work/mpirun.log" 2>&1 &
  pid=$!
  wait_for_line "$work/mpirun.log" "watching " 60
  kill -TERM "$pid"
  wait_for_exit "$pid" 30
  cat "$work/mpirun.log"
  [ "$rc" -eq 0 ] || fail "ringtrain-mpirun watcher exited $rc on SIGTERM"
  grep -q "stopped by SIGUSR1 after 0 evaluation(s)" "$work/mpirun.log" || fail "no stop message"
fi

# Busy: a signal during the evaluations ends the watch after the current one.
cp "$fixture"/run/ckpt/ckpt-{5,10,15,20,25}.h5 "$work/ckpt/"
"$exe" eval --device cpu --watch "$work/ckpt" --data "$fixture/d.h5" --interval 3600 --logdir "$work/logs" \
  </dev/null >"$work/busy.log" 2>&1 &
pid=$!
wait_for_line "$work/busy.log" "step 5: accuracy" 60
kill -"$sig" "$pid"
wait_for_exit "$pid" 15
cat "$work/busy.log"
[ "$rc" -eq 0 ] || fail "busy watcher exited $rc on SIG$sig"
grep -q "stopped by SIG$sig after" "$work/busy.log" || fail "no stop message"
# Whatever was evaluated before the stop was recorded whole, in step order.
steps=$(record_steps "$work/logs/eval/metrics.jsonl")
all_steps="5 10 15 20 25"
case "$all_steps" in "$steps"*) ;; *) fail "recorded steps '$steps'" ;; esac
[ -n "$steps" ] || fail "step 5 was evaluated but not recorded"
echo "PASS: SIG$sig stops the watcher cleanly"
