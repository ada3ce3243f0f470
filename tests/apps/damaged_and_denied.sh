#!/usr/bin/env bash
# Errors say what is wrong: a damaged newest checkpoint is skipped with a
# warning by eval and predict given a directory (as by train --resume latest);
# a checkpoint this user may not read is "permission denied", not "corrupt",
# and --resume latest stops on it instead of falling back past it; a plugin
# path that is a directory is named as one.
source "$(dirname "$0")/lib.sh"
CKPT=$WORK/run/ckpt
expect 0 train "done after" "$R" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 3 --ckpt-every 1 \
  --device cpu --ckpt-dir "$CKPT"
cp "$CKPT/ckpt-3.h5" "$WORK/ckpt-3.good"
head -c 3000 "$WORK/ckpt-3.good" > "$CKPT/ckpt-3.h5"
expect 0 eval_skips_damaged "skipping $CKPT/ckpt-3.h5, it cannot be read" "$R" eval --ckpt "$CKPT" --data "$DATA"
grep -q "checkpoint $CKPT/ckpt-2.h5 (step 2)" "$WORK/eval_skips_damaged.log" || fail "eval did not use ckpt-2"
expect 0 eval_np2_skips_damaged "skipping $CKPT/ckpt-3.h5" "${MPIRUN[@]}" -np 2 "$R" eval --ckpt "$CKPT" --data "$DATA"
expect 0 predict_skips_damaged "using $CKPT/ckpt-2.h5, the newest checkpoint that reads" \
  "$R" predict --ckpt "$CKPT" --data "$DATA" -o "$WORK/p.csv"
cp "$WORK/ckpt-3.good" "$CKPT/ckpt-3.h5"

# Permission denied, as a user who is not root (root reads anything).
if [ "$(id -u)" -eq 0 ]; then as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups -- env HOME="$WORK"); else as_user=(); fi
chmod 755 "$WORK" "$WORK/run"
chmod 777 "$CKPT" "$CKPT/flight"  # the run's flight records live in its --ckpt-dir
chmod 644 "$DATA" "$CKPT"/*.h5
chmod 600 "$CKPT/ckpt-3.h5"
expect 2 resume_denied "ckpt-3.h5: permission denied .*not falling back to an older checkpoint" \
  "${as_user[@]}" "$R" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 6 --ckpt-every 1 --device cpu \
  --ckpt-dir "$CKPT" --resume latest
! grep -q "resumed from" "$WORK/resume_denied.log" || fail "resumed past the unreadable checkpoint"
[ ! -e "$CKPT/ckpt-4.h5" ] || fail "trained over the unreadable checkpoint"
expect 2 eval_denied "ckpt-3.h5: permission denied" "${as_user[@]}" "$R" eval --ckpt "$CKPT/ckpt-3.h5" --data "$DATA"
! grep -q "corrupt" "$WORK/eval_denied.log" || fail "an unreadable checkpoint is called corrupt"
expect 2 eval_dir_denied "ckpt-3.h5: permission denied" "${as_user[@]}" "$R" eval --ckpt "$CKPT" --data "$DATA"

mkdir -p "$WORK/plugins"
expect 2 plugin_is_directory "plugin '$WORK/plugins' is a directory" \
  "$R" train --data "$DATA" --model "$MLP" --device cpu --plugin "$WORK/plugins"
expect 2 plugin_missing "plugin '$WORK/nope.so': no such file" \
  "$R" train --data "$DATA" --model "$MLP" --device cpu --plugin "$WORK/nope.so"
echo "PASS: damaged, unreadable and misnamed inputs are each reported as what they are"
