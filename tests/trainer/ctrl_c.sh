#!/usr/bin/env bash
# Ctrl-C through launch/ringtrain-mpirun: the terminal sends SIGINT to its
# foreground process group. The wrapper exited 1 at once with no message and
# the ranks ran on without a terminal (mpirun, given SIGINT twice, left them).
# Now the job stops as the README promises: a checkpoint, the final summary
# line, exit 143 (130 without --ckpt-dir), and no rank left running.
# The wrapper is started as an interactive shell starts a foreground job: in a
# process group of its own (set -m), with SIGINT not ignored, so that
# "kill -INT -- -GROUP" is what a terminal's Ctrl-C does.
source "$(dirname "$0")/lib.sh"
wrapper=$(cd "$(dirname "$0")/../../launch" && pwd)/ringtrain-mpirun
export RINGTRAIN_EXE

ctrl_c() {  # NAME EXPECTED_RC [train flags...]
  local name=$1 expected=$2 out=$WORK/$1 rc=0 group
  shift 2
  mkdir -p "$out"
  set -m
  "$wrapper" -n 2 --oversubscribe --bind-to none train --data "$DATA" --model "$MLP" --batch 8 \
    --epochs 100000 --log-every 1 --logdir "$out" --timeout 60 --device cpu "$@" >"$out/log.txt" 2>&1 &
  group=$!
  set +m
  for _ in $(seq 1 300); do
    [ -s "$out/metrics.jsonl" ] && break
    sleep 0.1
  done
  [ -s "$out/metrics.jsonl" ] || { cat "$out/log.txt"; fail "$name: training did not start"; }
  kill -INT -- "-$group"  # what Ctrl-C does
  timeout 60 tail --pid="$group" -f /dev/null || { cat "$out/log.txt"; fail "$name: the job did not end within 60 s of Ctrl-C"; }
  wait "$group" || rc=$?
  tail -4 "$out/log.txt"
  [ "$rc" -eq "$expected" ] || { cat "$out/log.txt"; fail "$name: exit code $rc, expected $expected"; }
  grep -q "ringtrain-mpirun: SIGINT (Ctrl-C): asking the ranks to checkpoint and stop" "$out/log.txt" \
    || fail "$name: the wrapper did not say what Ctrl-C does"
  grep -Eq "ringtrain: stopped after [0-9]+ steps" "$out/log.txt" || fail "$name: no final summary line"
  ! pgrep -f -- "--logdir $out " >/dev/null || fail "$name: ranks left running"
}

ctrl_c saved 143 --ckpt-dir "$WORK/saved/ckpt"
step=$(grep -Eo "ringtrain: stopped after [0-9]+ steps" "$WORK/saved/log.txt" | grep -Eo "[0-9]+")
[ -e "$WORK/saved/ckpt/ckpt-$step.h5" ] || { ls "$WORK/saved/ckpt"; fail "saved: no checkpoint of step $step"; }
grep -q "checkpoint $WORK/saved/ckpt/ckpt-$step.h5" "$WORK/saved/log.txt" || fail "saved: the summary does not name the checkpoint"
echo "ok: Ctrl-C through the wrapper: ckpt-$step.h5, the summary, exit 143"

ctrl_c unsaved 130
grep -q "stopped without a checkpoint (no --ckpt-dir)" "$WORK/unsaved/log.txt" || fail "unsaved: no word on the missing checkpoint"
echo "ok: Ctrl-C through the wrapper without --ckpt-dir: exit 130"
echo "PASS"
