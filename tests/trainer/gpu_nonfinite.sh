#!/usr/bin/env bash
# --nonfinite on a GPU, where the decision is taken on the device and the host
# learns of it at its next sync point: a NaN in rank 1's gradients at step 3
# (two ranks sharing the GPU) stops the run naming step 3, rank 1 and the
# tensor, and no checkpoint is written after step 2; skip:3 with AdamW leaves
# the state of step 2 at step 3; a NaN loss is named. Skipped (77) without an
# NVIDIA device.
[ -e /dev/nvidiactl ] || { echo "SKIPPED: no NVIDIA device"; exit 77; }
source "$(dirname "$0")/lib.sh"
# shellcheck disable=SC2034 # read by train() in lib.sh
TRAIN_DEVICE=cuda
common=(--data "$DATA" --batch 8 --epochs 100 --timeout 60 --device cuda --allow-gpu-sharing --log-every 4)

export RINGTRAIN_FAULT_NAN_RANK=1 RINGTRAIN_FAULT_NAN_STEP=3 RINGTRAIN_FAULT_NAN_COUNT=1
MPIRUN+=(-x RINGTRAIN_FAULT_NAN_RANK -x RINGTRAIN_FAULT_NAN_STEP -x RINGTRAIN_FAULT_NAN_COUNT)
run_fail nan -np 2 "$RINGTRAIN_EXE" train "${common[@]}" --model "$MLP" --max-steps 8 \
  --ckpt-dir "$WORK/nan/ckpt" --ckpt-every 2
grep -Eq "non-finite gradients at step 3: the local gradients of rank 1 were non-finite; first non-finite parameter tensor: fc1\.weight \(layer 1 'fc1'\); stopping" "$WORK/nan/log.txt" \
  || { cat "$WORK/nan/log.txt"; fail "nan: the message does not name step 3, rank 1 and fc1.weight"; }
[ "$(newest "$WORK/nan/ckpt")" = "$WORK/nan/ckpt/ckpt-2.h5" ] || { ls "$WORK/nan/ckpt"; fail "nan: a checkpoint was written after step 2"; }

out=$WORK/skip
TRAIN_LOG_FLAGS=(--check-every 3)
train 2 "$out" --model "$MLP" --batch 8 --epochs 100 --max-steps 6 --ckpt-every 1 --allow-gpu-sharing \
  --log-every 3 --nonfinite skip:3 --optimizer adamw
"$COMPARE" "$out/ckpt/ckpt-3.h5" "$out/ckpt/ckpt-2.h5" --exact --any-step \
  || fail "skip: the skipped step 3 changed the state of step 2"
"$COMPARE" "$out/ckpt/ckpt-4.h5" "$out/ckpt/ckpt-3.h5" --exact --any-step > /dev/null \
  && fail "skip: step 4 did not update the parameters"
grep -Eq "non-finite gradients at step 3: the local gradients of rank 1 were non-finite.*update skipped" "$out/log.txt" \
  || { cat "$out/log.txt"; fail "skip: no skip message"; }

export RINGTRAIN_FAULT_NAN_RANK=0 RINGTRAIN_FAULT_NAN_WHAT=loss
run_fail loss -np 1 -x RINGTRAIN_FAULT_NAN_WHAT "$RINGTRAIN_EXE" train "${common[@]}" --model "$MLP" --max-steps 8
grep -Eq "non-finite loss at step 3: the local loss of rank 0 was non-finite" "$WORK/loss/log.txt" \
  || { cat "$WORK/loss/log.txt"; fail "loss: the message does not name step 3 and rank 0's loss"; }
echo "PASS: --nonfinite on the GPU stops, skips and names as on the CPU"
