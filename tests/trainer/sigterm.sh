#!/usr/bin/env bash
# SIGTERM during training (as Slurm sends at its time limit) writes a valid
# checkpoint, exits non-zero on every rank, and the run resumes from it.
source "$(dirname "$0")/lib.sh"
out=$WORK/run
mkdir -p "$out"
"${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$DATA" --model "$MLP" --batch 8 --epochs 100000 \
  --ckpt-dir "$out/ckpt" --log-every 1 --logdir "$out" --timeout 60 --device cpu > "$out/log.txt" 2>&1 &
launcher=$!
# Wait until training runs, then signal the ranks themselves.
for _ in $(seq 1 300); do
  [ -s "$out/metrics.jsonl" ] && break
  sleep 0.1
done
[ -s "$out/metrics.jsonl" ] || { cat "$out/log.txt"; fail "training did not start"; }
pkill -TERM -f "$RINGTRAIN_EXE train --data $DATA" || true
rc=0
timeout 60 tail --pid=$launcher -f /dev/null || fail "the job did not end within 60 s of SIGTERM"
wait $launcher || rc=$?
cat "$out/log.txt" | tail -5
[ $rc -ne 0 ] || fail "a job stopped by SIGTERM must exit non-zero"
grep -q "stop requested" "$out/log.txt" || fail "no stop message"
ckpt=$(ls "$out"/ckpt/ckpt-*.h5 | sort -V | tail -1)
[ -n "$ckpt" ] || fail "no checkpoint after SIGTERM"
step=$(basename "$ckpt" .h5); step=${step#ckpt-}
train 2 "$WORK/resumed" --model "$MLP" --batch 8 --epochs 100000 --max-steps $((step + 3)) --resume "$ckpt"
grep -q "resumed from .* at step $step" "$WORK/resumed/log.txt" || fail "did not resume from the SIGTERM checkpoint"
echo "PASS: SIGTERM left $ckpt (step $step), and training resumed from it"
