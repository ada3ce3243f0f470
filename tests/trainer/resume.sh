#!/usr/bin/env bash
# Resume: 2k uninterrupted steps equal k steps, stop, resume, k steps: bit for
# bit on the same world size; within tolerance after 2 -> 4 ranks (same global
# batch). A missing checkpoint with --resume latest starts from scratch.
source "$(dirname "$0")/lib.sh"
common=(--model "$CNN" --epochs 100 --lr 0.05 --momentum 0.9 --seed 3)
train 2 "$WORK/full" --batch 8 --max-steps 24 "${common[@]}"
train 2 "$WORK/half" --batch 8 --max-steps 12 "${common[@]}"
cp -r "$WORK/half" "$WORK/same"
train 2 "$WORK/same" --batch 8 --max-steps 24 --resume latest "${common[@]}"
grep -q "resumed from .*ckpt-12.h5 at step 12" "$WORK/same/log.txt" || fail "did not resume at step 12"
same "$WORK/full" "$WORK/same" --exact
# 12 steps of 16 samples = 192 samples into epoch 0 (256 samples, 16 steps per epoch).
cp -r "$WORK/half" "$WORK/grow"
train 4 "$WORK/grow" --batch 4 --max-steps 24 --resume latest "${common[@]}"
grep -q "at step 12 (epoch 0, step 12 of the epoch)" "$WORK/grow/log.txt" || fail "world change did not map the cursor"
# Right after the restart, all 4 ranks hold the checkpoint's parameters.
hash=$("$COMPARE" --hash "$WORK/half/ckpt/ckpt-12.h5") || fail "cannot hash ckpt-12"
grep -q "parameters hash $hash on every rank" "$WORK/grow/log.txt" || fail "the 4 ranks did not start from ckpt-12's parameters (hash $hash)"
same "$WORK/full" "$WORK/grow" --rtol 1e-5
# A global batch that does not divide the position is refused clearly.
cp -r "$WORK/half" "$WORK/odd"
if "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$DATA" --ckpt-dir "$WORK/odd/ckpt" --resume latest \
     --batch 5 --max-steps 24 --device cpu "${common[@]}" > "$WORK/odd.log" 2>&1; then
  fail "resume with an incompatible global batch succeeded"
fi
grep -qi "global batch\|divis" "$WORK/odd.log" || { cat "$WORK/odd.log"; fail "no clear error for an incompatible global batch"; }
train 2 "$WORK/fresh" --batch 8 --max-steps 3 --resume latest "${common[@]}"
grep -q "no checkpoint found" "$WORK/fresh/log.txt" || fail "resume latest without checkpoints should start fresh"
echo "PASS: resume is exact on the same world size and consistent after 2 -> 4 ranks"
