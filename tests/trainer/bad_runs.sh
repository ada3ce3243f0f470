#!/usr/bin/env bash
# Mismatches and bad checkpoints end the job with a clear error, on every rank,
# without hanging.
source "$(dirname "$0")/lib.sh"
expect_error() {  # NAME REGEX COMMAND...
  local name=$1 regex=$2 rc=0
  shift 2
  timeout -k 5 60 "$@" > "$WORK/$name.log" 2>&1 || rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat "$WORK/$name.log"; fail "$name: exit code $rc"; }
  grep -Eq -- "$regex" "$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name: no /$regex/ in the output"; }
  echo "ok: $name: $(grep -m1 -E -- "$regex" "$WORK/$name.log")"
}
base=(--data "$DATA" --batch 8 --max-steps 4 --epochs 10 --timeout 30 --device cpu)
# Two ranks given different models: the start-up agreement names the field and the ranks.
expect_error model_mismatch "'model spec hash' is .* on rank 0.* on rank 1|'model spec hash' is .* on rank 1.* on rank 0" \
  "${MPIRUN[@]}" -np 1 "$RINGTRAIN_EXE" train "${base[@]}" --model "$MLP" : \
  -np 1 "$RINGTRAIN_EXE" train "${base[@]}" --model mlp:64-16-4
expect_error batch_mismatch "'--batch' is 8 on rank 0, but 4 on rank 1" \
  "${MPIRUN[@]}" -np 1 "$RINGTRAIN_EXE" train "${base[@]}" --model "$MLP" : \
  -np 1 "$RINGTRAIN_EXE" train --data "$DATA" --batch 4 --max-steps 4 --epochs 10 --timeout 30 --device cpu --model "$MLP"
# A checkpoint of another model.
train 1 "$WORK/other" --batch 8 --max-steps 2 --model mlp:64-16-4
expect_error incompatible_ckpt "ckpt-2.h5" \
  "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train "${base[@]}" --model "$MLP" --resume "$WORK/other/ckpt/ckpt-2.h5"
# A truncated checkpoint.
head -c 3000 "$WORK/other/ckpt/ckpt-2.h5" > "$WORK/truncated.h5"
expect_error corrupt_ckpt "truncated.h5" \
  "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train "${base[@]}" --model "$MLP" --resume "$WORK/truncated.h5"
# Bad flags: the flag is named, every rank exits non-zero.
expect_error bad_lr "--lr" "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train "${base[@]}" --lr -1
expect_error bad_backend "--backend" "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train "${base[@]}" --backend tcp
expect_error missing_data "nope.h5" "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$WORK/nope.h5" --device cpu
expect_error bad_model "token|model" "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train "${base[@]}" --model "mlp:64-x-4"
expect_error wrong_input "64|shape|input" "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train "${base[@]}" --model mlp:784-10
expect_error batch_too_big "global batch" "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$DATA" --model "$MLP" --batch 200 --max-steps 4 --device cpu
# --cuda-graph on refuses what a graph would repeat wrongly, and a CPU device, on every rank.
expect_error cuda_graph_dropout "--cuda-graph on: model .* draws dropout masks" \
  "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train "${base[@]}" --cuda-graph on \
  --model "flatten; dropout(p=0.2); linear(out=4)"
expect_error cuda_graph_cpu "--cuda-graph on: a CUDA graph needs a GPU" \
  "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train "${base[@]}" --model "$MLP" --cuda-graph on
expect_error cuda_graph_sync_bn "--cuda-graph on: --sync-bn sums BatchNorm's statistics" \
  "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train "${base[@]}" --model "$MLP" --sync-bn --cuda-graph on
# Replicas that drift apart are caught by the parameter check and named.
expect_error diverged_replicas "replicas diverged at step 2: the parameters of rank 1 differ" \
  env RINGTRAIN_FAULT_DIVERGE_RANK=1 "${MPIRUN[@]}" -x RINGTRAIN_FAULT_DIVERGE_RANK -np 3 "$RINGTRAIN_EXE" train \
  "${base[@]}" --model "$MLP" --check-every 2
echo "PASS: every bad run failed clearly"
