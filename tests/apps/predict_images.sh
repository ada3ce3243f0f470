#!/usr/bin/env bash
# `predict --images` as a user meets it (issue: a failed run left
# <out>.tmp-PID behind; --logits was ignored; a false "wrote 0 predictions"
# line; columns in another order than the split's; --data required though the
# checkpoint names its training data):
#   - a missing path, an empty folder, a file that is no image, a bad image in
#     a folder: exit 2 naming it, and no file at all under -o's name or a
#     temporary beside it (a file path is an image to predict: image_habits.sh);
#   - a folder: the split's column order (path for index, no label), --logits
#     columns, one "wrote N predictions" line;
#   - without --data, and with the data file gone: the checkpoint alone gives
#     the image size, the classes and their names, and the evaluation
#     transform (its record of the training data), as --data would;
#   - a checkpoint written before that record: the training data file it
#     names, and, that file gone, a clear exit 2 that asks for --data.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/lib.sh"
need_python_modules PIL h5py
cd "$WORK"
"$PYTHON" - <<'PY' || fail "cannot write the PNG tree"
import os
from PIL import Image
for c in ("cat", "dog"):
    os.makedirs(f"pngs/{c}", exist_ok=True)
    for i in range(4):
        Image.new("L", (8, 8), 30 * i + (0 if c == "cat" else 11)).save(f"pngs/{c}/{i}.png")
os.makedirs("bad", exist_ok=True)
Image.new("L", (8, 8), 5).save("bad/a.png")
open("bad/b.png", "wb").write(b"not a png at all")
os.makedirs("empty", exist_ok=True)
PY
"$R" convert images pngs --test-fraction 0.25 --no-progress -o i.h5 >/dev/null || fail "convert images"
"$R" train --data i.h5 --model "mlp:64-8-2" --batch 2 --max-steps 2 --log-every 1 --ckpt-dir ck \
  >train.log 2>&1 || { cat train.log; fail "train"; }

no_output_left() {  # NAME: nothing under out.csv's name, no temporary beside it
  local left
  left=$(find . -maxdepth 1 -name 'out.csv*')
  [ -z "$left" ] || fail "$1: left $left"
}
expect 2 images_missing "--images nothere: no such file or folder" \
  "$R" predict --ckpt ck --data i.h5 --images nothere -o out.csv
no_output_left images_missing
echo "not an image" > notes.txt
expect 2 images_not_image "notes.txt" "$R" predict --ckpt ck --data i.h5 --images notes.txt -o out.csv
no_output_left images_not_image
expect 2 images_empty "--images empty: no .jpg, .jpeg or .png file" \
  "$R" predict --ckpt ck --data i.h5 --images empty -o out.csv
no_output_left images_empty
expect 2 images_bad "bad/b.png" "$R" predict --ckpt ck --data i.h5 --images bad -o out.csv
no_output_left images_bad
expect 2 split_needs_data "--data is required" "$R" predict --ckpt ck -o out.csv
no_output_left split_needs_data

expect 0 images_logits "wrote 8 predictions of .* for the images of pngs to out.csv" \
  "$R" predict --ckpt ck --data i.h5 --images pngs --logits -o out.csv
! grep -q "wrote 0" "$WORK/images_logits.log" || fail "images_logits: a false 'wrote 0 predictions' line"
[ "$(grep -c "wrote" "$WORK/images_logits.log")" -eq 1 ] || fail "images_logits: more than one 'wrote' line"
head -1 out.csv | grep -qx "path,predicted,probability,predicted_name,logit_0,logit_1" \
  || fail "images_logits: header $(head -1 out.csv)"
expect 0 split_logits "wrote 2 predictions" "$R" predict --ckpt ck --data i.h5 --logits -o split.csv
head -1 split.csv | grep -qx "index,predicted,probability,label,predicted_name,label_name,logit_0,logit_1" \
  || fail "split_logits: header $(head -1 split.csv)"
"$PYTHON" - out.csv <<'PY' || fail "images_logits: rows"
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert len(rows) == 8, len(rows)
for r in rows:
    logits = [float(r["logit_0"]), float(r["logit_1"])]
    best = max(range(2), key=lambda k: logits[k])
    assert int(r["predicted"]) == best, r
    p = 1 / sum(math.exp(l - logits[best]) for l in logits)
    assert abs(float(r["probability"]) - p) < 1e-5, r
    assert r["predicted_name"] == ["cat", "dog"][best], r
PY

expect 0 images_without_data "image size 1x8x8 and 2 classes with their names from checkpoint" \
  "$R" predict --ckpt ck --images pngs -o out2.csv
cmp <(cut -d, -f1-4 out.csv) out2.csv || fail "images_without_data: other predictions than with --data"
mv i.h5 moved.h5
expect 0 images_data_gone "wrote 8 predictions" "$R" predict --ckpt ck --images pngs --logits -o out3.csv
cmp out.csv out3.csv || fail "images_data_gone: other predictions (or columns) than with --data"
cut -d, -f4 out3.csv | tail -n +2 | sort -u | grep -vxE "cat|dog" && fail "images_data_gone: a class name not the data's"

# An older checkpoint, without the record: its training data file, as before.
cp "$(ls ck/ckpt-*.h5 | sort -V | tail -1)" old.h5
"$PYTHON" - old.h5 <<'PY' || fail "cannot strip the record from old.h5"
import json, sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    config = json.loads(f.attrs["config"])
    assert "input" in config, "the checkpoint has no 'input' record"
    del config["input"]
    f.attrs["config"] = json.dumps(config)
PY
expect 2 old_ckpt_data_gone "has no record of .* and was trained on 'i.h5', which is not a file here; pass --data" \
  "$R" predict --ckpt old.h5 --images pngs -o out4.csv
[ -z "$(find . -maxdepth 1 -name 'out4.csv*')" ] || fail "old_ckpt_data_gone: left a file"
mv moved.h5 i.h5
expect 0 old_ckpt_data_here "image size and class names from i.h5, the checkpoint's training data" \
  "$R" predict --ckpt old.h5 --images pngs -o out5.csv
cmp out2.csv out5.csv || fail "old_ckpt_data_here: other predictions than the record's"

# An evaluation transform from --augment: the record's path applies it too
# (random_crop(6) trains on 6x6 crops; the checkpoint's eval is center_crop(6)).
"$R" train --data i.h5 --model "mlp:36-8-2" --augment "random_crop(6)" --batch 2 --max-steps 2 \
  --log-every 1 --ckpt-dir ck6 >train6.log 2>&1 || { cat train6.log; fail "train --augment"; }
expect 0 crop_with_data "wrote 8 predictions" "$R" predict --ckpt ck6 --data i.h5 --images pngs --logits -o c1.csv
mv i.h5 moved.h5
expect 0 crop_data_gone "evaluation transform center_crop" \
  "$R" predict --ckpt ck6 --images pngs --logits -o c2.csv
cmp c1.csv c2.csv || fail "crop_data_gone: other predictions than with --data"
echo "PASS"
