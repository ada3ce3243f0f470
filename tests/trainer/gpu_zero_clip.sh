#!/usr/bin/env bash
# On a GPU: --clip-norm computes its factor on the device, so a steady
# clipped step takes no host sync (a logged one takes one, the loss read), for
# the plain path and under --zero 1 with --grad-dtype bf16 (the shard's norm
# all-reduced on the device); the clipped run equals the CPU-style reference
# of the same run without ZeRO within float tolerance; --zero 1 matches the
# unsharded optimizer on 2 ranks sharing the GPU. Skipped (77) without an
# NVIDIA device.
[ -e /dev/nvidiactl ] || { echo "SKIPPED: no NVIDIA device"; exit 77; }
source "$(dirname "$0")/lib.sh"
TRAIN_DEVICE=cuda
common=(--model "$CNN" --max-steps 15 --epochs 100 --optimizer adamw --lr 0.01 --seed 5
        --bucket-mb 0.0005 --cache --prefetch 3 --clip-norm 0.05)
no_syncs() {
  "$PYTHON" - "$1/metrics.jsonl" <<'PY' || fail "$1: a steady clipped step synchronised with the host"
import json, sys
train = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
assert train, "no train rows"
for r in train:
    assert r["host_syncs_between_logs"] == 0 and r["host_syncs"] == 1, r
PY
}
train 1 "$WORK/clip" --batch 16 "${common[@]}"
no_syncs "$WORK/clip"
train 1 "$WORK/clip-zero" --batch 16 "${common[@]}" --zero 1 --grad-dtype bf16
no_syncs "$WORK/clip-zero"
same "$WORK/clip" "$WORK/clip-zero" --rtol 1e-5
train 2 "$WORK/share-zero" --batch 8 --allow-gpu-sharing "${common[@]}" --zero 1
same "$WORK/clip" "$WORK/share-zero" --rtol 1e-4 --atol 1e-6
echo "PASS: clipping on the GPU takes no host sync per steady step, with and without --zero 1"
