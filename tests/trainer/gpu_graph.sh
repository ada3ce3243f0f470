#!/usr/bin/env bash
# On a GPU, the graph-model features the CPU tests cover: a residual block with
# BatchNorm, a rectangular (1x3 / 3x1) convolution, label smoothing and the
# gradient-buffer plan train to the CPU's parameters within float tolerance
# (--tf32 off); --sync-bn gives 1 rank x 16 = 2 ranks x 8 on the one GPU
# (--allow-gpu-sharing: shm staged through pinned memory); steady steps take
# no host sync. Skipped (77) without an NVIDIA device.
[ -e /dev/nvidiactl ] || { echo "SKIPPED: no NVIDIA device"; exit 77; }
source "$(dirname "$0")/lib.sh"
RES="a = conv2d(out=4, kernel=3, padding=1, bias=0); b = batch_norm; c = relu; \
d = conv2d(out=4, kernel=1x3, padding=0x1, bias=0); r = conv2d(out=4, kernel=3x1, padding=1x0, bias=0); \
e = batch_norm(zero_init=0); p = conv2d(c, out=4, kernel=1, bias=0); s = add(e, p); relu; \
global_avg_pool; linear(out=4)"
common=(--model "$RES" --max-steps 10 --epochs 100 --lr 0.05 --momentum 0.9 --seed 11
        --label-smoothing 0.1 --tf32 off --bucket-mb 0.0005)
TRAIN_DEVICE=cpu train 1 "$WORK/cpu" --batch 16 "${common[@]}"
TRAIN_DEVICE=cuda train 1 "$WORK/gpu" --batch 16 "${common[@]}"
same "$WORK/cpu" "$WORK/gpu" --rtol 1e-3 --atol 1e-5
"$PYTHON" - "$WORK/gpu/metrics.jsonl" <<'PY' || fail "a steady GPU step of the graph model synchronised"
import json, sys
train = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
assert train and all(r["host_syncs_between_logs"] == 0 for r in train), train
PY
TRAIN_DEVICE=cuda train 1 "$WORK/s1" --batch 16 --sync-bn "${common[@]}"
TRAIN_DEVICE=cuda train 2 "$WORK/s2" --batch 8 --sync-bn --allow-gpu-sharing "${common[@]}"
same "$WORK/s1" "$WORK/s2" --rtol 1e-3 --atol 1e-5
echo "PASS: the graph model trains on the GPU as on the CPU; --sync-bn 1 x 16 = 2 x 8 on the GPU"
