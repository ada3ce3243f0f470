#!/usr/bin/env bash
# One exit-code contract for every subcommand, tested as a user meets it:
# 0 success; 2 bad input or configuration (ringtrain-mpirun never retries it);
# 3 a runtime failure (retried); 143 stopped by a signal after a checkpoint;
# 130 stopped by a signal with nothing saved (no --ckpt-dir).
# One-process tools print one line, without Open MPI's MPI_ABORT banner.
source "$(dirname "$0")/lib.sh"
CKPT=$WORK/run/ckpt
expect 0 train_ok "done after" "$R" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 3 --device cpu \
  --ckpt-dir "$CKPT"

# train
expect 2 train_bad_flag "--batch" "$R" train --data "$DATA" --batch 0
expect 2 train_bad_model "model spec" "$R" train --data "$DATA" --model "mlp:16-x-3" --device cpu
one_line train_bad_model
expect 2 train_nccl_on_cpu "--backend nccl needs a GPU rank, but rank 0 runs on cpu" \
  "$R" train --data "$DATA" --model "$MLP" --device cpu --backend nccl
one_line train_nccl_on_cpu
expect 2 train_nccl_on_cpu_np2 "--backend nccl needs a GPU rank" \
  "${MPIRUN[@]}" -np 2 "$R" train --data "$DATA" --model "$MLP" --device cpu --backend nccl
if ! ls /dev/nvidia[0-9]* > /dev/null 2>&1; then
  expect 2 train_cuda_without_gpu "--device cuda: no CUDA device is visible on host" \
    "$R" train --data "$DATA" --model "$MLP" --device cuda
  one_line train_cuda_without_gpu
  expect 2 eval_cuda_without_gpu "--device cuda: no CUDA device" \
    "$R" eval --ckpt "$CKPT" --data "$DATA" --device cuda
fi
# A runtime failure: non-finite gradients stop the job (exit 3, retried).
expect 3 train_runtime_failure "non-finite" env RINGTRAIN_FAULT_NAN_RANK=0 \
  "$R" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 3 --device cpu
# A test's fault variable that does not parse is bad input, named, before any work.
expect 2 train_bad_fault "RINGTRAIN_FAULT_NAN_STEP='soon': expected a whole number, at least 1" \
  env RINGTRAIN_FAULT_NAN_RANK=0 RINGTRAIN_FAULT_NAN_STEP=soon \
  "$R" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 3 --device cpu
one_line train_bad_fault
# A signal: the run stops after the current step with a checkpoint, exit 143,
# and says which signal it was and which rank on which host got it.
env RINGTRAIN_FAULT_STEP_DELAY_MS=200 "$R" train --data "$DATA" --model "$MLP" --batch 8 --epochs 50 \
  --device cpu --ckpt-dir "$WORK/sig/ckpt" > "$WORK/signal.log" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q "step 1 \|loss" "$WORK/signal.log" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
kill -USR1 $pid
rc=0
wait $pid || rc=$?
[ $rc -eq 143 ] || { cat "$WORK/signal.log"; fail "SIGUSR1: exit code $rc, expected 143"; }
grep -q "\[rank 0/$(hostname)\] SIGUSR1 received" "$WORK/signal.log" \
  || { cat "$WORK/signal.log"; fail "SIGUSR1: the message does not name the rank and host"; }
grep -q "stop requested (SIGUSR1): stopping after step" "$WORK/signal.log" \
  || { cat "$WORK/signal.log"; fail "SIGUSR1: the stop is not named SIGUSR1"; }
ls "$WORK/sig/ckpt"/ckpt-*.h5 > /dev/null || fail "SIGUSR1: no checkpoint"
echo "ok: train stopped by SIGUSR1 (exit 143), checkpoint written"
# The same stop without --ckpt-dir saves nothing: not 143 (a script that
# requeues on 143 would start over for ever), but 130, said in the last line.
env RINGTRAIN_FAULT_STEP_DELAY_MS=200 "$R" train --data "$DATA" --model "$MLP" --batch 8 --epochs 50 \
  --device cpu > "$WORK/signal_unsaved.log" 2>&1 &
pid=$!
for _ in $(seq 300); do grep -q "step 1 \|loss" "$WORK/signal_unsaved.log" 2>/dev/null && break; sleep 0.1; done
sleep 0.5
kill -TERM $pid
rc=0
wait $pid || rc=$?
[ $rc -eq 130 ] || { cat "$WORK/signal_unsaved.log"; fail "SIGTERM without --ckpt-dir: exit code $rc, expected 130"; }
grep -q "stop requested (SIGTERM): stopping after step" "$WORK/signal_unsaved.log" &&
  grep -q "stopped without a checkpoint (no --ckpt-dir): nothing to resume from, exit 130" "$WORK/signal_unsaved.log" \
  || { cat "$WORK/signal_unsaved.log"; fail "SIGTERM without --ckpt-dir: the stop is not explained"; }
echo "ok: train stopped by SIGTERM without --ckpt-dir (exit 130), said so"

# eval
expect 0 eval_ok "accuracy" "$R" eval --ckpt "$CKPT" --data "$DATA"
expect 2 eval_missing_ckpt "nope.h5: no such file" "$R" eval --ckpt "$WORK/nope.h5" --data "$DATA"
one_line eval_missing_ckpt
head -c 3000 "$(ls "$CKPT"/ckpt-*.h5 | head -1)" > "$WORK/truncated.h5"
expect 2 eval_truncated_ckpt "truncated.h5" "$R" eval --ckpt "$WORK/truncated.h5" --data "$DATA"
one_line eval_truncated_ckpt
expect 2 eval_missing_split "nope" "$R" eval --ckpt "$CKPT" --data "$DATA" --split nope
one_line eval_missing_split
expect 2 eval_np2_bad_ckpt "nope.h5" "${MPIRUN[@]}" -np 2 "$R" eval --ckpt "$WORK/nope.h5" --data "$DATA"

# predict
expect 0 predict_ok "wrote 21 predictions" "$R" predict --ckpt "$CKPT" --data "$DATA" -o "$WORK/p.csv"
expect 2 predict_exists "-o $WORK/p.csv already exists: pass --force" \
  "$R" predict --ckpt "$CKPT" --data "$DATA" -o "$WORK/p.csv"
one_line predict_exists
expect 0 predict_force "wrote 21 predictions" "$R" predict --ckpt "$CKPT" --data "$DATA" -o "$WORK/p.csv" --force
expect 2 predict_over_data "is also the input --data" "$R" predict --ckpt "$CKPT" --data "$DATA" -o "$DATA" --force
expect 2 predict_missing_ckpt "nope.h5: no such file" "$R" predict --ckpt "$WORK/nope.h5" --data "$DATA" -o "$WORK/q.csv"
one_line predict_missing_ckpt
[ ! -e "$WORK/q.csv" ] || fail "predict left an output after failing"

# convert (the output guard has its own test: convert_keeps_inputs.sh)
expect 2 convert_idx_missing "missing-images" "$R" convert idx --train-images "$WORK/missing-images.gz" -o "$WORK/i.h5"
one_line convert_idx_missing
expect 2 convert_csv_missing "nope.csv" "$R" convert csv --train "$WORK/nope.csv" -o "$WORK/c.h5"
one_line convert_csv_missing
expect 2 convert_synthetic_exists "already exists" "$R" convert synthetic --n 8 -o "$DATA"
one_line convert_synthetic_exists
expect 2 convert_np2 "already exists" "${MPIRUN[@]}" -np 2 "$R" convert synthetic --n 8 -o "$DATA"

# data, bench, doctor, info
expect 2 data_inspect_bad_split "nope" "$R" data inspect --data "$DATA" --split nope --batch 8
one_line data_inspect_bad_split
expect 2 bench_step_bad_model "model spec" "$R" bench step --model "mlp:4-x" --device cpu
expect 2 bench_data_missing "nope.h5" "$R" bench data --data "$WORK/nope.h5"
mkdir -p "$WORK/empty-flight"
expect 2 doctor_flight_empty "holds no rank-" "$R" doctor flight "$WORK/empty-flight"
one_line doctor_flight_empty
expect 2 info_bad_flag "--nope" "$R" info --nope
expect 0 info_ok "" "$R" info
echo "PASS: every subcommand keeps the exit-code contract"
