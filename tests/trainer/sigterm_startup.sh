#!/usr/bin/env bash
# A stop signal that reaches the ranks while they are still starting up (MPI,
# data, model: Slurm can signal a requeued job at once) must not kill them: it
# stops the run after its first steps, with a checkpoint, like a signal later.
source "$(dirname "$0")/lib.sh"
out=$WORK/run
mkdir -p "$out"
"${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$DATA" --model "$MLP" --batch 8 --epochs 100000 \
  --ckpt-dir "$out/ckpt" --timeout 60 --device cpu > "$out/log.txt" 2>&1 &
launcher=$!
# Signal both ranks once they catch SIGUSR1 (bit 10 of SigCgt in /proc: a
# process can only be signalled safely after it installs a handler) and before
# they announce the run, i.e. during start-up. Before its main() no process can
# catch a signal, so that instant is not what is tested.
# Anchored: the ranks only, not mpirun (whose command line holds the same words).
pattern="^$RINGTRAIN_EXE train --data $DATA"
catching() {
  local n=0 pid mask
  for pid in $(pgrep -f "$pattern"); do
    mask=$(awk '/^SigCgt:/ {print $2}' "/proc/$pid/status" 2>/dev/null) || continue
    [ -n "$mask" ] && (( 0x$mask & 0x200 )) && n=$((n + 1))
  done
  [ "$n" -ge 2 ]
}
for _ in $(seq 1 2000); do
  catching && break
  sleep 0.005
done
catching || fail "the ranks never installed a SIGUSR1 handler"
pkill -USR1 -f "$pattern" || fail "no rank process to signal"
if grep -q "ringtrain train:" "$out/log.txt"; then
  fail "the run was announced before the handler was installed: not signalled during start-up"
fi
rc=0
timeout 60 tail --pid=$launcher -f /dev/null || fail "the job did not end within 60 s of the signal"
wait $launcher || rc=$?
tail -5 "$out/log.txt"
[ $rc -ne 0 ] || fail "a job stopped by a signal must exit non-zero"
grep -q "stop requested" "$out/log.txt" || fail "no stop message: a rank died of the signal during start-up"
ckpt=$(ls "$out"/ckpt/ckpt-*.h5 2>/dev/null | sort -V | tail -1)
[ -n "$ckpt" ] || fail "no checkpoint after a signal during start-up"
step=$(basename "$ckpt" .h5); step=${step#ckpt-}
[ "$step" -le 3 ] || fail "checkpoint at step $step: the signal did not arrive during start-up (test timing)"
echo "PASS: SIGUSR1 during start-up -> stopped at step $step with $ckpt"
