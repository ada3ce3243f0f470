#!/usr/bin/env bash
# image_train.sh EXE FIXTURES MPIRUN...
# From a folder of PNGs to a trained model and its predictions: convert images
# at 32x32 RGB, train the resnet20 preset (CIFAR's ResNet, BatchNorm included)
# with the cifar augmentation preset (plus a normalisation) on 2 ranks and
# check it learned (10 classes: chance is 0.10); then eval and
# predict, which must take the evaluation transform from the checkpoint: eval
# reproduces the run's final test accuracy, and predict on the test folder
# itself (new images, no labels) predicts the same as on the converted split.
set -euo pipefail
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python
exe=$1 fixtures=$2
shift 2
work=$fixtures/train
rm -rf "$work"
mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }
"$exe" convert images --train "$fixtures/fashion/train" --test "$fixtures/fashion/test" \
  --size 32,32 --channels 3 --no-progress -o "$work/set.h5" > /dev/null
model=resnet20
aug='cifar, normalize(mean=(0.29,0.29,0.29), std=(0.35,0.35,0.35))'
"$@" -np 2 "$exe" train --data "$work/set.h5" --model "$model" --batch 16 --epochs 6 \
  --augment "$aug" --loader-threads 2 --seed 3 --lr 0.05 --momentum 0.9 --ckpt-dir "$work/ckpt" 2>&1 | tee "$work/train.log"
grep -q "data: --augment random_crop(32, padding=4), hflip(p=0.5), normalize" "$work/train.log" ||
  fail "the augmentation is not in the log"
grep -q "data: evaluation transform center_crop(32), normalize" "$work/train.log" ||
  fail "the derived evaluation transform is not in the log"
acc=$(sed -n 's/.*test accuracy \([0-9.]*\).*/\1/p' "$work/train.log" | tail -1)
echo "resnet20: test accuracy after 6 epochs: $acc"
awk -v a="$acc" 'BEGIN { exit !(a >= 0.4) }' || fail "accuracy $acc < 0.4"

"$exe" eval --ckpt "$work/ckpt" --data "$work/set.h5" --json "$work/eval.json" 2>&1 | tee "$work/eval.log"
grep -q "evaluation transform center_crop(32), normalize.*(from the checkpoint's training run)" \
  "$work/eval.log" || fail "eval did not take the transform from the checkpoint"
"$exe" predict --ckpt "$work/ckpt" --data "$work/set.h5" -o "$work/split.csv"
"$exe" predict --ckpt "$work/ckpt" --data "$work/set.h5" --images "$fixtures/fashion/test" \
  -o "$work/folder.csv"
"$PYTHON" - "$work/eval.json" "$work/split.csv" "$work/folder.csv" "$acc" <<'PY' || fail "eval/predict"
import csv, json, sys
ev = json.load(open(sys.argv[1]))
split = list(csv.DictReader(open(sys.argv[2])))
folder = list(csv.DictReader(open(sys.argv[3])))
assert abs(ev["accuracy"] - float(sys.argv[4])) < 1e-4, (ev["accuracy"], sys.argv[4])
assert len(split) == len(folder) == 100, (len(split), len(folder))
# The converted split is the folder in sorted path order: row for row the same.
assert [r["predicted"] for r in split] == [r["predicted"] for r in folder]
right = sum(r["predicted_name"] == r["path"].split("/")[-2] for r in folder)
assert abs(right / 100 - ev["accuracy"]) < 1e-6, (right, ev["accuracy"])
assert all(r["predicted_name"] == r["predicted"] for r in split)  # class folders are named 0..9
print("eval accuracy", ev["accuracy"], "= predict on the split = predict on the folder")
PY
echo PASS
