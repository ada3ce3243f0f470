#!/usr/bin/env bash
# A finite loss that explodes (a ReLU MLP at --lr 1e6) is named: "loss
# diverging at step S: ... Nx the median ..."; --on-divergence warn (the
# default) trains on to the end, stop ends every rank with exit 3 (a runtime
# failure, as a non-finite step's stop). A healthy run says nothing.
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
# A healthy run: no warning.
train 2 "$WORK/healthy" "${common[@]}" --lr 0.05
! grep -q "diverging" "$WORK/healthy/log.txt" || { cat "$WORK/healthy/log.txt"; fail "a warning for a healthy run"; }
echo "PASS: a diverging loss is named (warn trains on, stop exits 3); a healthy run is quiet"
