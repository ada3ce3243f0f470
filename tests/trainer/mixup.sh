#!/usr/bin/env bash
# --augment's batch steps end to end: mixup and cutmix runs exit 0 and repeat
# bit for bit (every draw comes from (seed, step, rank)), a mixup run resumed
# at step 6 equals the uninterrupted one bit for bit, both steps together
# follow the per-sample steps of an image set, mixup takes [features]
# samples, and bad input exits 2 naming --augment: a bad alpha, cutmix on
# samples that are not images.
source "$(dirname "$0")/lib.sh"
common=(--model "$CNN" --epochs 100 --lr 0.05 --momentum 0.9 --seed 3 --batch 8)

train 2 "$WORK/mixup" --max-steps 12 --augment "mixup(alpha=0.2)" "${common[@]}"
grep -q "data: --augment batch step(s) mixup(alpha=0.2)" "$WORK/mixup/log.txt" \
  || { cat "$WORK/mixup/log.txt"; fail "no mixup in the log"; }
train 2 "$WORK/mixup2" --max-steps 12 --augment "mixup(alpha=0.2)" "${common[@]}"
same "$WORK/mixup" "$WORK/mixup2" --exact
train 2 "$WORK/plain" --max-steps 12 "${common[@]}"
"$COMPARE" "$(newest "$WORK/mixup/ckpt")" "$(newest "$WORK/plain/ckpt")" --exact >/dev/null 2>&1 \
  && fail "mixup trained exactly as without it"
echo "ok: mixup(alpha=0.2) repeats bit for bit and changes the training"

train 2 "$WORK/half" --max-steps 6 --augment "mixup(alpha=0.2)" "${common[@]}"
train 2 "$WORK/half" --max-steps 12 --resume latest --augment "mixup(alpha=0.2)" "${common[@]}"
same "$WORK/mixup" "$WORK/half" --exact
echo "ok: a mixup run resumed at step 6 equals the uninterrupted one"

train 2 "$WORK/cutmix" --max-steps 12 --augment "cutmix(alpha=1.0)" "${common[@]}"
train 2 "$WORK/cutmix2" --max-steps 12 --augment "cutmix(alpha=1.0)" "${common[@]}"
same "$WORK/cutmix" "$WORK/cutmix2" --exact
echo "ok: cutmix(alpha=1.0) repeats bit for bit"

# Both, after the per-sample steps of a uint8 image set, with accumulation.
"$RINGTRAIN_EXE" convert synthetic --force --n 128 --test-n 21 --shape 3,12,12 --classes 4 \
  --dtype u8 --seed 5 -o "$WORK/images.h5" >/dev/null 2>&1 || fail "could not make the image set"
aug="random_crop(8, padding=1), hflip, mixup(alpha=0.4), cutmix"
DATA=$WORK/images.h5 train 2 "$WORK/both" --max-steps 8 --accum 2 --augment "$aug" "${common[@]}"
DATA=$WORK/images.h5 train 2 "$WORK/both2" --max-steps 8 --accum 2 --augment "$aug" "${common[@]}"
same "$WORK/both" "$WORK/both2" --exact
grep -q "evaluation transform center_crop(8)" "$WORK/both/log.txt" \
  || { cat "$WORK/both/log.txt"; fail "the evaluation transform is not the unmixed center crop"; }
echo "ok: random_crop, hflip, then mixup or cutmix per batch: repeats bit for bit"

# [features] samples: mixup works, cutmix is refused.
"$RINGTRAIN_EXE" convert synthetic --force --n 64 --test-n 11 --shape 12 --classes 3 --seed 2 \
  -o "$WORK/features.h5" >/dev/null 2>&1 || fail "could not make the feature set"
DATA=$WORK/features.h5 train 1 "$WORK/features" --model mlp:12-8-3 --batch 8 --max-steps 4 \
  --augment "mixup(alpha=0.2)"
echo "ok: mixup on [12] feature samples"

expect_exit2() {  # NAME REGEX [train flags...]
  local name=$1 regex=$2 rc=0
  shift 2
  timeout -k 5 120 "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --batch 8 --max-steps 2 --device cpu \
    --timeout 30 "$@" > "$WORK/$name.log" 2>&1 || rc=$?
  [ $rc -eq 2 ] || { cat "$WORK/$name.log"; fail "$name: exit code $rc, expected 2"; }
  grep -Eq -- "$regex" "$WORK/$name.log" || { cat "$WORK/$name.log"; fail "$name: no /$regex/"; }
  echo "ok: $name: $(grep -m1 -E -- "$regex" "$WORK/$name.log")"
}
expect_exit2 bad_alpha "--augment 'mixup\(alpha=-1\)': mixup takes \(alpha=A\) with A > 0" \
  --data "$DATA" --model "$CNN" --augment "mixup(alpha=-1)"
expect_exit2 cutmix_features "--augment cutmix\(alpha=1\): cutmix cuts a box out of images, and the samples here are \[12\]" \
  --data "$WORK/features.h5" --model mlp:12-8-3 --augment "cutmix(alpha=1.0)"
expect_exit2 eval_mixup "--eval-transform 'mixup': mixup mixes the samples of a training batch" \
  --data "$DATA" --model "$CNN" --eval-transform mixup
echo "PASS: mixup and cutmix train repeatably; bad values exit 2 naming the flag"
