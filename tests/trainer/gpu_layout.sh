#!/usr/bin/env bash
# On a GPU: --layout nhwc (cuDNN NHWC descriptors, the [K, R, S, C] filter
# copy, the channels-last BatchNorm, pools, concat and global average pool)
# trains resnet20 and an inception-like block to the parameters of --layout
# nchw on the GPU and of nhwc on the CPU, within float tolerance (--tf32 off,
# so the arithmetic is fp32 on both); --layout auto picks nhwc for bf16 and for
# TF32 convolutions on the GPU and nchw for fp32 with --tf32 off; steady nhwc
# steps take no host sync. Skipped (77)
# without an NVIDIA device.
[ -e /dev/nvidiactl ] || { echo "SKIPPED: no NVIDIA device"; exit 77; }
source "$(dirname "$0")/lib.sh"
# shellcheck disable=SC2034 # read by train() in lib.sh
TRAIN_LOG_FLAGS=(--log-every 2 --check-every 2)
INCEPTION="input(1, 8, 8); a = conv2d(out=4, kernel=3, padding=1); b = batch_norm; c = relu; \
b1 = conv2d(c, out=3, kernel=1); b2 = conv2d(c, out=2, kernel=1x3, padding=0x1); \
b3 = avg_pool2d(c, kernel=3, stride=1, padding=1); b4 = max_pool2d(c, kernel=3, stride=1, padding=1); \
cat = concat(b1, b2, b3, b4); p = max_pool2d(kernel=2); flatten; linear(out=4)"
for model in resnet20 "$INCEPTION"; do
  name=$( [ "$model" = resnet20 ] && echo r20 || echo inc )
  common=(--model "$model" --max-steps 6 --batch 16 --epochs 100 --lr 0.05 --momentum 0.9 --seed 5 --tf32 off)
  TRAIN_DEVICE=cuda train 1 "$WORK/$name-gpu-nchw" --layout nchw "${common[@]}"
  TRAIN_DEVICE=cuda train 1 "$WORK/$name-gpu-nhwc" --layout nhwc "${common[@]}"
  TRAIN_DEVICE=cpu train 1 "$WORK/$name-cpu-nhwc" --layout nhwc "${common[@]}"
  grep -q "activations nhwc" "$WORK/$name-gpu-nhwc/log.txt" || fail "$name: the GPU run is not nhwc"
  same "$WORK/$name-gpu-nchw" "$WORK/$name-gpu-nhwc" --rtol 1e-3 --atol 1e-5
  same "$WORK/$name-cpu-nhwc" "$WORK/$name-gpu-nhwc" --rtol 1e-3 --atol 1e-5
  "$PYTHON" - "$WORK/$name-gpu-nhwc/metrics.jsonl" <<'PY' || fail "$name: a steady nhwc step synchronised"
import json, sys
train = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
assert train and all(r["host_syncs_between_logs"] == 0 for r in train[1:]), train
PY
done
common=(--model resnet20 --max-steps 2 --batch 16 --epochs 100 --lr 0.05 --seed 5)
TRAIN_DEVICE=cuda train 1 "$WORK/auto-bf16" --precision bf16 "${common[@]}"
grep -q "activations nhwc (--layout auto)" "$WORK/auto-bf16/log.txt" || fail "auto did not pick nhwc for bf16 on the GPU"
TRAIN_DEVICE=cuda train 1 "$WORK/auto-tf32" "${common[@]}"
grep -q "activations nhwc (--layout auto)" "$WORK/auto-tf32/log.txt" || fail "auto did not pick nhwc for TF32 convolutions"
TRAIN_DEVICE=cuda train 1 "$WORK/auto-fp32" --tf32 off "${common[@]}"
grep -q "activations nchw (--layout auto)" "$WORK/auto-fp32/log.txt" || fail "auto did not pick nchw for fp32 without TF32"
echo "PASS: nhwc on the GPU matches nchw on the GPU and nhwc on the CPU; auto follows its rule"
