#!/usr/bin/env bash
# On a GPU: --precision bf16 gives the CPU's bf16 run within float tolerance
# (the same rounding kernels, kernels/precision.cuh; the GPU's convolutions and
# matrix products read exact 16-bit copies of the same on-grid values and
# accumulate in fp32, and --tf32 off keeps the fp32 ones, backward filter, the
# CPU's arithmetic); its steady steps take no host sync;
# fp16's loss scaler follows the same rule as on the CPU with an injected
# overflow (the scale is read back once per step). Skipped (77) without an
# NVIDIA device.
[ -e /dev/nvidiactl ] || { echo "SKIPPED: no NVIDIA device"; exit 77; }
source "$(dirname "$0")/lib.sh"
common=(--model "$CNN" --max-steps 12 --batch 16 --epochs 100 --lr 0.05 --momentum 0.9 --seed 5
        --tf32 off)
TRAIN_DEVICE=cpu train 1 "$WORK/cpu" --precision bf16 "${common[@]}"
TRAIN_DEVICE=cuda train 1 "$WORK/gpu" --precision bf16 "${common[@]}"
same "$WORK/cpu" "$WORK/gpu" --rtol 2e-2 --atol 1e-3
"$PYTHON" - "$WORK/gpu/metrics.jsonl" <<'PY' || fail "bf16 on the GPU: a steady step synchronised"
import json, sys
train = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
assert train and all(r["host_syncs_between_logs"] == 0 for r in train), train
PY
export RINGTRAIN_FAULT_NAN_RANK=0 RINGTRAIN_FAULT_NAN_STEP=3 RINGTRAIN_FAULT_NAN_COUNT=1
MPIRUN+=(-x RINGTRAIN_FAULT_NAN_RANK -x RINGTRAIN_FAULT_NAN_STEP -x RINGTRAIN_FAULT_NAN_COUNT)
# shellcheck disable=SC2034 # read by train() in lib.sh
TRAIN_LOG_FLAGS=(--log-every 1 --check-every 1)
TRAIN_DEVICE=cuda train 1 "$WORK/fp16" --precision fp16 --loss-scale-window 2 "${common[@]}"
"$PYTHON" - "$WORK/fp16/metrics.jsonl" <<'PY' || fail "fp16 on the GPU: the loss scale does not follow the scaler's rule"
import json, sys
t = {r["step"]: r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"}
assert [t[s]["loss_scale"] for s in range(1, 7)] == [65536, 131072, 65536, 65536, 131072, 131072], t
assert t[12]["overflow_steps"] == 1 and t[12]["skipped_steps"] == 0, t[12]
PY
echo "PASS: bf16 on the GPU matches the CPU's bf16; fp16's scaler as on the CPU"
