#!/usr/bin/env bash
# On a GPU: --cuda-graph on (each step's forward and backward captured per
# input slot after one eager step, then replayed) trains to the eager run's
# parameters bit for bit: resnet20 in fp32 and bf16 (cuDNN, BatchNorm, NHWC),
# with --accum 2 (a graph that accumulates), and 2 ranks sharing the GPU (the
# all-reduce started after the replay, bucket by bucket in backward's order).
# Skipped (77) without an NVIDIA device.
[ -e /dev/nvidiactl ] || { echo "SKIPPED: no NVIDIA device"; exit 77; }
source "$(dirname "$0")/lib.sh"
# shellcheck disable=SC2034 # read by train() in lib.sh
TRAIN_LOG_FLAGS=(--log-every 2 --check-every 2)
# A failed capture falls back to eager steps (said in the log): the
# comparison would then be eager against eager.
captured() {
  if grep -q "capture failed" "$1/log.txt"; then
    fail "$1: $(grep -m1 "capture failed" "$1/log.txt")"
  fi
}
for precision in fp32 bf16; do
  common=(--model resnet20 --max-steps 8 --batch 16 --epochs 100 --lr 0.05 --momentum 0.9 --seed 5
          --tf32 off --precision "$precision")
  TRAIN_DEVICE=cuda train 1 "$WORK/$precision-eager" "${common[@]}"
  TRAIN_DEVICE=cuda train 1 "$WORK/$precision-graph" --cuda-graph on "${common[@]}"
  grep -q "cuda-graph on: each step's forward and backward" "$WORK/$precision-graph/log.txt" \
    || fail "$precision: the graph run does not say it replays graphs"
  captured "$WORK/$precision-graph"
  same "$WORK/$precision-eager" "$WORK/$precision-graph" --exact
done
common=(--model resnet20 --max-steps 6 --batch 8 --epochs 100 --lr 0.05 --seed 5 --tf32 off --accum 2)
TRAIN_DEVICE=cuda train 1 "$WORK/accum-eager" "${common[@]}"
TRAIN_DEVICE=cuda train 1 "$WORK/accum-graph" --cuda-graph on "${common[@]}"
captured "$WORK/accum-graph"
same "$WORK/accum-eager" "$WORK/accum-graph" --exact
TRAIN_DEVICE=cuda train 2 "$WORK/share-eager" --allow-gpu-sharing "${common[@]}"
TRAIN_DEVICE=cuda train 2 "$WORK/share-graph" --allow-gpu-sharing --cuda-graph on "${common[@]}"
captured "$WORK/share-graph"
same "$WORK/share-eager" "$WORK/share-graph" --exact
echo "PASS: --cuda-graph on gives the eager runs' parameters bit for bit"
