#!/usr/bin/env bash
# The messages a newcomer meets on the first day name what they typed and what
# to do, not where in the source the check is:
#   a typo of a subcommand, a flag or a preset gets "did you mean";
#   a file name given to --model without '@' says how to read a file;
#   `model list` lists the presets;
#   a model file whose last layer does not fit the data names its file:line;
#   a full disk (here a file-size limit: EFBIG, as ENOSPC) gives the system's
#   reason for eval and predict, and a checkpoint says it in one line;
#   data check names every label out of range (up to 20), not "cannot be read";
#   JPEG images of different sizes say so, and what to do;
#   no message carries a source file:line.
source "$(dirname "$0")/lib.sh"
cd "$WORK" || exit 1

expect 2 subcommand_typo "unknown subcommand 'trian' of 'ringtrain' \(did you mean 'train'\?\)" "$R" trian
expect 2 nested_typo "unknown subcommand 'shwo' of 'ringtrain model' \(did you mean 'show'\?\)" \
  "$R" model shwo --model cnn
expect 2 flag_typo "unknown flag '--epoch' for 'ringtrain train' \(did you mean '--epochs'\?\)" \
  "$R" train --data "$DATA" --epoch 3
expect 2 preset_typo "--model 'resnet51' is not a known preset \(did you mean 'resnet50'\?\) \(presets: cnn, " \
  "$R" model show --model resnet51
expect 2 preset_file "--model 'myres.txt' is not a known preset; to read a model from the file myres.txt, write --model @myres.txt" \
  "$R" model show --model myres.txt
expect 0 model_list "resnet50 +ImageNet ResNet-50" "$R" model list
grep -Eq "^  cnn " "$WORK/model_list.log" && grep -Eq "^  gpt2 " "$WORK/model_list.log" \
  || { cat "$WORK/model_list.log"; fail "model list misses cnn or gpt2"; }

# The default bucket cap of model show is train's.
expect 0 show_bucket_default "gradient buckets \(--bucket-mb 1\)" "$R" model show --model "$MLP" --input 16 --classes 3

# A model file whose last layer has 5 outputs for 3 classes: named by its
# file and line, not by the expanded spec.
printf 'flatten\nlinear(out=8)\nrelu\n\nlinear(out=5)\n' > head5.txt
expect 2 model_file_mismatch "model spec ends at node '[a-z0-9]+' at head5.txt:5:1 with outputs of shape \[5\] but the data has 3 classes" \
  "$R" train --data "$DATA" --model @head5.txt --max-steps 1 --device cpu
! grep -q "flatten; linear" "$WORK/model_file_mismatch.log" || { cat "$WORK/model_file_mismatch.log"; fail "the whole spec is printed"; }

# A full disk: FULL is a 64 KiB tmpfs in a mount namespace of the command's
# own (a user namespace: no root needed), filled first for eval and predict;
# left empty for train, whose checkpoint (80 KiB of weights and momentum)
# does not fit.
# "${on_full_disk[@]}" FILL(yes|no) COMMAND...
on_full_disk=(unshare --mount --map-root-user sh -c 'mount -t tmpfs -o size=64k tmpfs FULL || exit 9
  [ "$1" = yes ] && head -c 1M /dev/zero > FULL/filler 2>/dev/null; shift; exec "$@"' on_full_disk)
mkdir -p FULL
"$R" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 2 --device cpu --ckpt-dir ck > train.log 2>&1 ||
  { cat train.log; fail "cannot train the checkpoint"; }
if unshare --mount --map-root-user true 2>/dev/null; then
  expect 2 eval_full_disk "--json FULL/e.json: write failed: No space left on device" \
    "${on_full_disk[@]}" yes "$R" eval --ckpt ck --data "$DATA" --json FULL/e.json
  expect 2 predict_full_disk "-o FULL/p.csv: write failed: No space left on device" \
    "${on_full_disk[@]}" yes "$R" predict --ckpt ck --data "$DATA" -o FULL/p.csv
  expect 3 checkpoint_full_disk "checkpoint FULL/ck/ckpt-2.h5: cannot finish writing .*: file write failed: No space left on device" \
    "${on_full_disk[@]}" no "$R" train --data "$DATA" --model mlp:16-512-3 --batch 8 --max-steps 2 --device cpu --ckpt-dir FULL/ck
  ! grep -q "HDF5-DIAG\|#000:\|#001:" "$WORK/checkpoint_full_disk.log" \
    || { cat "$WORK/checkpoint_full_disk.log"; fail "an HDF5 error stack"; }
else
  echo "SKIPPED: the full-disk checks (no user namespaces here: unshare --mount --map-root-user fails)"
fi

# Labels out of range: every one counted, the first 20 named.
cp "$DATA" badlabels.h5
"$PYTHON" - badlabels.h5 <<'PY'
import sys
import h5py
with h5py.File(sys.argv[1], "a") as f:
    y = f["test/y"][...]
    for i in range(0, 21, 1):
        y[i] = 7 + i  # 21 labels outside [0, 3)
    f["test/y"][...] = y
PY
expect 2 data_check_labels "problem in /test: 21 label\(s\) in y are outside \[0, 3\) \(num_classes = 3\): sample 0 has 7, sample 1 has 8, .*sample 19 has 26 \(the first 20 shown\)" \
  "$R" data check badlabels.h5
grep -q "/test: 21 samples of" "$WORK/data_check_labels.log" || { cat "$WORK/data_check_labels.log"; fail "the split is not described"; }
! grep -q "cannot be read" "$WORK/data_check_labels.log" || fail "data check says the split cannot be read"

# JPEG images of two sizes, stored as they are (no --size), one class each.
mkdir -p photos/a photos/b
"$PYTHON" - photos <<'PY'
import sys
from PIL import Image
Image.new("RGB", (20, 16), (200, 10, 10)).save(f"{sys.argv[1]}/a/x.jpg")
Image.new("RGB", (12, 12), (10, 10, 200)).save(f"{sys.argv[1]}/b/y.jpg")
Image.new("RGB", (18, 14), (10, 200, 10)).save(f"{sys.argv[1]}/b/z.jpg")
PY
"$R" convert images --train photos --test photos --store jpeg --no-progress -o jpegs.h5 > convert.log 2>&1 ||
  { cat convert.log; fail "cannot convert the JPEGs"; }
expect 2 mixed_sizes "jpegs.h5:/train holds images of different sizes \(converted without --size\): .*--augment 'random_resized_crop\(224\), hflip'" \
  "$R" train --data jpegs.h5 --model "$MLP" --max-steps 1 --device cpu
expect 0 mixed_sizes_augmented "done after 1 steps" \
  "$R" train --data jpegs.h5 --model "flatten; linear(out=2)" --batch 1 --max-steps 1 --device cpu --augment "resize((8,8))"

# A file that is no image, skipped: the reason, without the check's source line.
mkdir -p skip/a skip/b
cp photos/a/x.jpg skip/a/ && cp photos/b/y.jpg skip/b/ && echo "not an image" > skip/b/notes.jpg
expect 0 convert_skipped "convert: skipped skip/b/notes.jpg: not a JPEG or PNG file" \
  "$R" convert images --train skip --test skip --size 8 --skip-bad --no-progress -o skip.h5

# Not one message above opens with (or holds) a source file:line.
if grep -El "(src|include|kernels)/[a-z_/]+\.(cpp|h|cu|cuh):[0-9]+" "$WORK"/*.log; then
  fail "a message names a source file:line"
fi
echo "PASS: messages name what the user typed, with what to do"
