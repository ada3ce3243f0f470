#!/usr/bin/env bash
# ZeRO-1 (--zero 1): the same parameters and optimizer state as without it,
# for SGD with momentum and AdamW at 1-4 ranks (an odd-sized buffer, 2281
# parameters, in buckets that no world size divides), on every CPU backend, with --accum 2, with
# --clip-norm and with --grad-dtype bf16; a ZeRO checkpoint resumes bit for
# bit on the same world size, and on another world size with or without
# --zero 1 (and an ordinary checkpoint under it); the --nonfinite guard skips
# the same step on every rank; the optimizer-state bytes per rank shrink.
source "$(dirname "$0")/lib.sh"
# A few-hundred-byte bucket cap: many buckets, so reduce-scatters run during backward.
model="mlp:64-33-4"  # 2281 parameters: odd
params=2281
base=(--model "$model" --epochs 100 --seed 11 --global-batch 12 --bucket-mb 0.0005)
common=("${base[@]}" --max-steps 12)
sgd=(--optimizer sgd --lr 0.05 --momentum 0.9 --weight-decay 0.001)
adamw=(--optimizer adamw --lr 0.01 --weight-decay 0.01)
backends=(shm ring mpi shm)

for opt in sgd adamw; do
  declare -n flags=$opt
  train 1 "$WORK/$opt-base" "${common[@]}" "${flags[@]}"
  for np in 1 2 3 4; do
    out=$WORK/$opt-zero-$np
    train $np "$out" "${common[@]}" "${flags[@]}" --zero 1 --backend "${backends[$((np - 1))]}"
    grep -q "reduce-scattered per bucket: --zero 1" "$out/log.txt" || fail "$out: no ZeRO start-up line"
    if [ $np = 1 ]; then
      same "$WORK/$opt-base" "$out" --exact  # the same arithmetic in the same order
    else
      same "$WORK/$opt-base" "$out" --rtol 1e-5
    fi
  done
done

# --accum 2 (with the reduce-scatters after backward: --no-overlap) and
# --clip-norm (the norm summed per shard and all-reduced).
train 1 "$WORK/accum-base" "${common[@]}" "${sgd[@]}" --accum 2
train 3 "$WORK/accum-zero" "${common[@]}" "${sgd[@]}" --accum 2 --zero 1 --backend ring --no-overlap
same "$WORK/accum-base" "$WORK/accum-zero" --rtol 1e-5
train 1 "$WORK/clip-base" "${common[@]}" "${adamw[@]}" --clip-norm 0.05
train 4 "$WORK/clip-zero" "${common[@]}" "${adamw[@]}" --clip-norm 0.05 --zero 1 --backend mpi
same "$WORK/clip-base" "$WORK/clip-zero" --rtol 1e-5
"$PYTHON" - "$WORK/clip-base/metrics.jsonl" "$WORK/clip-zero/metrics.jsonl" <<'PY' || fail "clip: the norms differ or never clip"
import json, sys
norms = [[r["grad_norm"] for r in map(json.loads, open(p)) if r.get("kind") == "train"] for p in sys.argv[1:]]
assert norms[0] and len(norms[0]) == len(norms[1]), norms
assert max(norms[0]) > 0.05, norms  # the clip is active
for a, b in zip(*norms):
    assert abs(a - b) <= 1e-5 * a, (a, b)
PY

# --grad-dtype bf16 under ZeRO: close to fp32, the reduce-scatter bytes halved.
train 2 "$WORK/bf16-zero" "${common[@]}" "${sgd[@]}" --zero 1 --grad-dtype bf16
same "$WORK/sgd-base" "$WORK/bf16-zero" --rtol 0.05 --atol 2e-3
"$PYTHON" - "$WORK/sgd-zero-2/metrics.jsonl" "$WORK/bf16-zero/metrics.jsonl" "$WORK/sgd-base/metrics.jsonl" $params <<'PY' \
  || fail "ZeRO's bytes or optimizer-state bytes are not as expected"
import json, sys
rows = [[r for r in map(json.loads, open(p)) if r.get("kind") == "train"] for p in sys.argv[1:4]]
n = int(sys.argv[4])
f32, bf16, one = rows
# Reduce-scatter inputs (padded per bucket) in f32 or bf16, plus the f32 all-gather.
assert f32[-1]["allreduce_bytes"] > bf16[-1]["allreduce_bytes"] > 0, (f32[-1], bf16[-1])
# SGD momentum: n floats unsharded; about half of that on each of 2 ranks.
assert one[-1]["optimizer_state_bytes"] == n * 4, one[-1]
assert n * 2 <= f32[-1]["optimizer_state_bytes"] < n * 2 + 400, f32[-1]
PY

# Resume: 6 steps, stop, 6 more equal 12 uninterrupted steps.
train 2 "$WORK/full" "${common[@]}" "${adamw[@]}" --zero 1
train 2 "$WORK/half" "${base[@]}" --max-steps 6 "${adamw[@]}" --zero 1
for np_zero in "2 1" "3 1" "1 0" "4 0"; do
  read -r np z <<< "$np_zero"
  out=$WORK/resume-$np-zero$z
  cp -r "$WORK/half" "$out"
  train $np "$out" "${common[@]}" "${adamw[@]}" --zero $z --resume latest
  grep -q "resumed from .*ckpt-6.h5 at step 6" "$out/log.txt" || fail "$out did not resume at step 6"
  if [ $np = 2 ]; then same "$WORK/full" "$out" --exact; else same "$WORK/full" "$out" --rtol 1e-5; fi
done
# An ordinary checkpoint, resumed under --zero 1 on 3 ranks.
train 1 "$WORK/plain-half" "${base[@]}" --max-steps 6 "${adamw[@]}"
cp -r "$WORK/plain-half" "$WORK/plain-to-zero"
train 3 "$WORK/plain-to-zero" "${common[@]}" "${adamw[@]}" --zero 1 --resume latest
same "$WORK/full" "$WORK/plain-to-zero" --rtol 1e-5

# The --nonfinite guard: a NaN in rank 1's gradients at step 3 is skipped on
# every rank, as without ZeRO (each rank sees only its shard of the average).
export RINGTRAIN_FAULT_NAN_RANK=1 RINGTRAIN_FAULT_NAN_STEP=3 RINGTRAIN_FAULT_NAN_COUNT=1
MPIRUN+=(-x RINGTRAIN_FAULT_NAN_RANK -x RINGTRAIN_FAULT_NAN_STEP -x RINGTRAIN_FAULT_NAN_COUNT)
train 2 "$WORK/nan-plain" "${common[@]}" "${sgd[@]}" --nonfinite skip:2
train 2 "$WORK/nan-zero" "${common[@]}" "${sgd[@]}" --nonfinite skip:2 --zero 1
grep -Eq "non-finite gradients at step 3: the local gradients of rank 1 were non-finite.*update skipped" \
  "$WORK/nan-zero/log.txt" || { cat "$WORK/nan-zero/log.txt"; fail "ZeRO: no skip message"; }
same "$WORK/nan-plain" "$WORK/nan-zero" --rtol 1e-5
unset RINGTRAIN_FAULT_NAN_RANK

# model show reports the optimizer-state bytes per rank: about 1/world under ZeRO.
full=$("$RINGTRAIN_EXE" model show --model "$model" --input 64 --classes 4 --optimizer adamw --json \
  | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["optimizer_state_bytes"])')
sharded=$("$RINGTRAIN_EXE" model show --model "$model" --input 64 --classes 4 --optimizer adamw --world 4 --zero 1 --json \
  | "$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["optimizer_state_bytes"])')
[ "$full" = $((params * 8)) ] || fail "model show: adamw state $full bytes, expected $((params * 8))"
[ "$sharded" -ge $((params * 2)) ] && [ "$sharded" -lt $((params * 2 + 100)) ] \
  || fail "model show: adamw state under --zero 1 over 4 ranks is $sharded bytes"
"$RINGTRAIN_EXE" model show --model "$model" --input 64 --classes 4 --world 3 --zero 1 \
  | grep -q "optimizer state (sgd, momentum 0.9): .* per rank with --zero 1 over 3 ranks" \
  || fail "model show: no optimizer-state line"
echo "PASS: --zero 1 matches the unsharded optimizer (sgd, adamw; 1-4 ranks; accum, clip, bf16), resumes across world sizes, skips non-finite steps"
