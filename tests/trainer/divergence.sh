#!/usr/bin/env bash
# A finite loss that explodes (a ReLU MLP at --lr 1e6) is named: "loss
# diverging at step S: ... Nx the median ..."; --on-divergence warn (the
# default) trains on to the end, stop ends every rank with exit 3 (a runtime
# failure, as a non-finite step's stop), also when no progress line falls
# between the explosion and the end. A healthy run says nothing.
source "$(dirname "$0")/lib.sh"
common=(--model "$MLP" --epochs 100 --max-steps 30 --batch 8 --seed 5)
TRAIN_LOG_FLAGS=(--log-every 1 --check-every 10)
train 2 "$WORK/warn" "${common[@]}" --lr 1e6 --momentum 0
grep -Eq "loss diverging at step [0-9]+: loss [0-9.e+]+ is [0-9.e+]+x the median [0-9.e+-]+ of the last [0-9]+ logged losses" \
  "$WORK/warn/log.txt" || { cat "$WORK/warn/log.txt"; fail "no divergence warning at --lr 1e6"; }
grep -q "step 30/30" "$WORK/warn/log.txt" || fail "--on-divergence warn did not train to the end"
"$PYTHON" - "$WORK/warn/metrics.jsonl" <<'PY' || fail "the loss did not explode while staying finite"
import json, math, sys
losses = [r["loss"] for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "train"]
assert all(math.isfinite(l) for l in losses), losses
assert max(losses) > 100 * losses[0], losses
PY
# The same with --on-divergence stop: exit 3 on every rank, with the message.
rc=0
"${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$DATA" --device cpu --timeout 60 --log-every 1 \
  "${common[@]}" --lr 1e6 --momentum 0 --on-divergence stop > "$WORK/stop.log" 2>&1 || rc=$?
[ $rc -eq 3 ] || { cat "$WORK/stop.log"; fail "--on-divergence stop: exit code $rc, expected 3"; }
grep -Eq "loss diverging at step [0-9]+: .*stopping \(--on-divergence stop\)" "$WORK/stop.log" \
  || { cat "$WORK/stop.log"; fail "--on-divergence stop: no message"; }
! grep -q "step 30/30" "$WORK/stop.log" || fail "--on-divergence stop trained to the end"
# Every step's loss, not only logged ones: with the default --log-every 50 a
# 30-step run logs once, at its end, and the explosion went unflagged. The
# device checks each step (no host sync) and the first diverging step is
# named at the next sync point, before any checkpoint is written from it.
rc=0
"${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$DATA" --device cpu --timeout 60 \
  "${common[@]}" --lr 1e6 --momentum 0 --on-divergence stop --ckpt-dir "$WORK/every/ckpt" \
  --ckpt-every 40 > "$WORK/every.log" 2>&1 || rc=$?
[ $rc -eq 3 ] || { cat "$WORK/every.log"; fail "--on-divergence stop, --log-every 50: exit code $rc, expected 3"; }
grep -Eq "loss diverging at step ([1-9]|1[0-9]|2[0-9]): rank [01]'s loss [0-9.e+]+ per sample is [0-9.e+]+x the running mean [0-9.e+-]+ of its steps before \(every step's loss is checked on the device.*stopping \(--on-divergence stop\)" \
  "$WORK/every.log" || { cat "$WORK/every.log"; fail "--log-every 50: the diverging step is not named"; }
# (the directory holds the run's flight records, <ckpt-dir>/flight, and its lock)
[ -z "$(ls "$WORK/every/ckpt"/ckpt-*.h5 2>/dev/null)" ] || fail "--log-every 50: a checkpoint was written after the divergence"
echo "ok: $(grep -m1 -o "loss diverging at step [0-9]*: [^(]*" "$WORK/every.log")"
# A healthy run: no warning.
train 2 "$WORK/healthy" "${common[@]}" --lr 0.05
# shellcheck disable=SC2034 # (read by train() in lib.sh)
TRAIN_LOG_FLAGS=(--log-every 50 --check-every 10)
train 2 "$WORK/healthy50" "${common[@]}" --lr 0.05 --on-divergence stop
for h in healthy healthy50; do
  ! grep -q "diverging" "$WORK/$h/log.txt" || { cat "$WORK/$h/log.txt"; fail "$h: a warning for a healthy run"; }
done
echo "PASS: a diverging loss is named (warn trains on, stop exits 3); a healthy run is quiet"
