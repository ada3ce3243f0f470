#!/usr/bin/env bash
# Image habits from torchvision: `convert images --size 8` is an 8x8 square;
# `predict --images` takes one image file, a list of files and folders (the
# rows in the order given); a name that is neither is refused, naming it.
source "$(dirname "$0")/lib.sh"
cd "$WORK" || exit 1
mkdir -p photos/red photos/blue
"$PYTHON" - photos <<'PY'
import sys
from PIL import Image
for i in range(6):
    Image.new("RGB", (20 + i, 14), (200 - i, 10, 10)).save(f"{sys.argv[1]}/red/r{i}.png")
    Image.new("RGB", (16, 12 + i), (10, 10, 200 - i)).save(f"{sys.argv[1]}/blue/b{i}.png")
PY
expect 0 size_square "/train: 12 images of 3x8x8 uint8, 2 classes" \
  "$R" convert images --train photos --test photos --size 8 --no-progress -o set.h5
"$R" train --data set.h5 --model "flatten; linear(out=2)" --batch 4 --max-steps 6 --device cpu --ckpt-dir ck \
  > train.log 2>&1 || { cat train.log; fail "cannot train on the images"; }

expect 0 predict_one_file "wrote 1 predictions of .* for the images of photos/red/r0.png to one.csv" \
  "$R" predict --ckpt ck --data set.h5 --images photos/red/r0.png -o one.csv
[ "$(sed -n 2p one.csv | cut -d, -f1)" = "photos/red/r0.png" ] || { cat one.csv; fail "one.csv does not name the file"; }
expect 0 predict_list "wrote 8 predictions of .* for the images of photos/blue/b1.png, photos/red/r2.png, photos/blue to list.csv" \
  "$R" predict --ckpt ck --data set.h5 --images photos/blue/b1.png photos/red/r2.png photos/blue -o list.csv
[ "$(cut -d, -f1 list.csv | tr '\n' ' ')" = "path photos/blue/b1.png photos/red/r2.png photos/blue/b0.png photos/blue/b1.png photos/blue/b2.png photos/blue/b3.png photos/blue/b4.png photos/blue/b5.png " ] \
  || { cat list.csv; fail "list.csv rows are not in the order given"; }
expect 2 predict_missing "--images photos/green.png: no such file or folder" \
  "$R" predict --ckpt ck --data set.h5 --images photos/green.png -o missing.csv
echo "PASS: --size S, predict on files and lists"
