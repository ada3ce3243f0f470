#!/usr/bin/env bash
# --resume latest with a damaged newest checkpoint: a truncated (then a
# garbage) newest file is skipped with a warning naming it and why, the run
# resumes from the newest file that reads and ends bit for bit where an
# uninterrupted run ends. A readable checkpoint of another model is still
# refused, and a directory where nothing reads is an error, not a fresh start.
source "$(dirname "$0")/lib.sh"
common=(--model "$MLP" --epochs 100 --lr 0.05 --momentum 0.9 --seed 5 --batch 8)
train 2 "$WORK/full" --max-steps 16 "${common[@]}"
train 2 "$WORK/half" --max-steps 12 --ckpt-every 4 "${common[@]}"
[ -f "$WORK/half/ckpt/ckpt-12.h5" ] && [ -f "$WORK/half/ckpt/ckpt-8.h5" ] || fail "expected ckpt-8 and ckpt-12"

# Truncated newest file.
cp -r "$WORK/half" "$WORK/cut"
size=$(stat -c %s "$WORK/cut/ckpt/ckpt-12.h5")
truncate -s $((size / 2)) "$WORK/cut/ckpt/ckpt-12.h5"
train 2 "$WORK/cut" --max-steps 16 --resume latest "${common[@]}"
grep -q "skipping .*ckpt-12.h5, it cannot be read: .*\(corrupt\|truncated\)" "$WORK/cut/log.txt" \
  || { cat "$WORK/cut/log.txt"; fail "no warning naming the truncated ckpt-12.h5 and why"; }
grep -q "resumed from .*ckpt-8.h5 at step 8" "$WORK/cut/log.txt" || fail "did not fall back to ckpt-8"
same "$WORK/full" "$WORK/cut" --exact

# A newest file that is not HDF5 at all, and a second damaged one below it.
cp -r "$WORK/half" "$WORK/junk"
echo "not a checkpoint" > "$WORK/junk/ckpt/ckpt-12.h5"
truncate -s 100 "$WORK/junk/ckpt/ckpt-8.h5"
train 2 "$WORK/junk" --max-steps 16 --resume latest "${common[@]}"
grep -q "skipping .*ckpt-12.h5, it cannot be read: .*not an HDF5 file" "$WORK/junk/log.txt" || fail "no warning for the garbage ckpt-12"
grep -q "skipping .*ckpt-8.h5" "$WORK/junk/log.txt" || fail "no warning for the truncated ckpt-8"
grep -q "resumed from .*ckpt-4.h5 at step 4" "$WORK/junk/log.txt" || fail "did not fall back to ckpt-4"
same "$WORK/full" "$WORK/junk" --exact

# Nothing reads: an error, not a silent fresh start.
mkdir -p "$WORK/none/ckpt"
echo "junk" > "$WORK/none/ckpt/ckpt-3.h5"
if "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$DATA" --ckpt-dir "$WORK/none/ckpt" --resume latest \
     --max-steps 4 --device cpu "${common[@]}" > "$WORK/none.log" 2>&1; then
  fail "resume latest with no readable checkpoint succeeded"
fi
grep -q "none of the 1 checkpoint(s) .* can be read" "$WORK/none.log" || { cat "$WORK/none.log"; fail "unclear error when no checkpoint reads"; }

# A readable newest checkpoint of another model is refused, not skipped.
cp -r "$WORK/half" "$WORK/other"
train 1 "$WORK/othermodel" --max-steps 20 --model "mlp:64-16-4" --epochs 100 --batch 8 --seed 5
cp "$WORK/othermodel/ckpt/ckpt-20.h5" "$WORK/other/ckpt/ckpt-20.h5"
if "${MPIRUN[@]}" -np 2 "$RINGTRAIN_EXE" train --data "$DATA" --ckpt-dir "$WORK/other/ckpt" --resume latest \
     --max-steps 24 --device cpu "${common[@]}" > "$WORK/other.log" 2>&1; then
  fail "resume latest accepted a checkpoint of another model"
fi
grep -q "ckpt-20.h5.*written for model" "$WORK/other.log" || { cat "$WORK/other.log"; fail "no clear refusal of another model's checkpoint"; }
echo "PASS: resume latest skips damaged newest checkpoints with a warning and matches the uninterrupted run"
