#!/usr/bin/env bash
# --global-batch: the same G = 64 samples per step at any world size. 10 steps
# on 1, 3 (64 = 22 + 21 + 21) and 4 ranks, for shm, ring and mpi, with --accum
# 1 and 2, end at the same parameters (float tolerance); a 4-rank checkpoint
# resumes on 3 ranks and on 1 and matches the uninterrupted run.
source "$(dirname "$0")/lib.sh"
common=(--model "$MLP" --global-batch 64 --epochs 100 --lr 0.05 --momentum 0.9 --seed 13
        --bucket-mb 0.0005)
tol=(--rtol 1e-4 --atol 1e-6)
train 1 "$WORK/base" "${common[@]}" --max-steps 10 --backend shm
grep -q "global batch 64 (--global-batch) = 64 per micro-step x 1 accumulation step(s), split over 1 rank(s): 64 per rank" \
  "$WORK/base/log.txt" || { cat "$WORK/base/log.txt"; fail "global batch not reported"; }
base_acc=$(final_accuracy "$WORK/base")
train 1 "$WORK/base-a2" "${common[@]}" --max-steps 10 --backend shm --accum 2
same "$WORK/base" "$WORK/base-a2" "${tol[@]}"
for backend in shm ring mpi; do
  for accum in 1 2; do
    for np in 3 4; do
      out=$WORK/$backend-a$accum-$np
      train "$np" "$out" "${common[@]}" --max-steps 10 --backend "$backend" --accum "$accum"
      same "$WORK/base" "$out" "${tol[@]}"
      acc=$(final_accuracy "$out")
      "$PYTHON" -c "import sys; sys.exit(abs($acc - $base_acc) > 1.5 / 101)" \
        || fail "$backend accum $accum np $np: accuracy $acc vs $base_acc"
    done
  done
done
grep -q "split over 3 rank(s): 21 or 22 per rank (buffers sized for 22)" "$WORK/shm-a1-3/log.txt" \
  || fail "uneven split not reported"
grep -q "split over 4 rank(s): 8 per rank" "$WORK/mpi-a2-4/log.txt" || fail "accum split not reported"

# Resume a 4-rank checkpoint (step 5, sample 320) on 3 ranks and on 1.
train 4 "$WORK/half" "${common[@]}" --max-steps 5 --backend shm
for np in 3 1; do
  cp -r "$WORK/half" "$WORK/resume-$np"
  train "$np" "$WORK/resume-$np" "${common[@]}" --max-steps 10 --backend shm --resume latest
  grep -q "resumed from .*ckpt-5.h5 at step 5 (epoch 1, step 1 of the epoch)" "$WORK/resume-$np/log.txt" \
    || { cat "$WORK/resume-$np/log.txt"; fail "4 -> $np ranks did not resume at step 5"; }
  same "$WORK/base" "$WORK/resume-$np" "${tol[@]}"
done

# --batch and --global-batch exclude each other; G must fit the ranks and --accum.
"$RINGTRAIN_EXE" train --data "$DATA" --batch 8 --global-batch 64 > "$WORK/both.log" 2>&1 && fail "--batch with --global-batch accepted"
grep -q "excludes" "$WORK/both.log" || { cat "$WORK/both.log"; fail "unclear error for --batch with --global-batch"; }
"${MPIRUN[@]}" -np 4 "$RINGTRAIN_EXE" train --data "$DATA" --global-batch 3 --device cpu > "$WORK/small.log" 2>&1 \
  && fail "a global batch smaller than the world was accepted"
grep -q "fewer than the 4 ranks" "$WORK/small.log" || { cat "$WORK/small.log"; fail "unclear error for G < world"; }
"$RINGTRAIN_EXE" train --data "$DATA" --global-batch 63 --accum 2 --device cpu > "$WORK/odd.log" 2>&1 \
  && fail "a global batch not divisible by --accum was accepted"
grep -q "must be a multiple of --accum" "$WORK/odd.log" || { cat "$WORK/odd.log"; fail "unclear error for G % accum"; }
echo "PASS: --global-batch 64 gives the same parameters on 1, 3 and 4 ranks (shm, ring, mpi; accum 1, 2) and resumes 4 -> 3, 4 -> 1"
