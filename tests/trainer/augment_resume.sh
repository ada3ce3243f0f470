#!/usr/bin/env bash
# Augmentation across a resume: with --augment (random crops and flips drawn
# from (seed, epoch, index)) 24 uninterrupted steps equal 12 steps, stop,
# resume, 12 steps, bit for bit; and 2 -> 4 ranks after the stop stays within
# float tolerance, since every sample is augmented the same at any world size.
source "$(dirname "$0")/lib.sh"
IMAGES=$WORK/images.h5
"$RINGTRAIN_EXE" convert synthetic --force --n 256 --test-n 101 --shape 3,12,12 --classes 4 \
  --dtype u8 --seed 5 -o "$IMAGES" >/dev/null 2>&1 || fail "could not make the image set"
DATA=$IMAGES
aug="random_resized_crop(8, scale=(0.3,1)), hflip, normalize(mean=(0.5,0.5,0.5), std=(0.3,0.3,0.3))"
common=(--model "$CNN" --epochs 100 --lr 0.05 --momentum 0.9 --seed 3 --augment "$aug")
train 2 "$WORK/full" --batch 8 --max-steps 24 --loader-threads 3 "${common[@]}"
grep -q "data: --augment random_resized_crop(8" "$WORK/full/log.txt" || fail "no augmentation in the log"
train 2 "$WORK/half" --batch 8 --max-steps 12 "${common[@]}"
cp -r "$WORK/half" "$WORK/same"
train 2 "$WORK/same" --batch 8 --max-steps 24 --resume latest --loader-threads 2 "${common[@]}"
grep -q "resumed from .*ckpt-12.h5 at step 12" "$WORK/same/log.txt" || fail "did not resume at step 12"
same "$WORK/full" "$WORK/same" --exact
cp -r "$WORK/half" "$WORK/grow"
train 4 "$WORK/grow" --batch 4 --max-steps 24 --resume latest "${common[@]}"
same "$WORK/full" "$WORK/grow" --rtol 1e-5
echo "PASS: augmented training resumes bit for bit, and on 4 ranks within tolerance"
