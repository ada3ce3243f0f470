#!/usr/bin/env bash
# The cnn preset on the full Fashion-MNIST with 2 ranks reaches >= 0.90 test
# accuracy (label `long`: not in the default CI run). Skips (77) without the
# Debian dataset-fashion-mnist package.
source "$(dirname "$0")/lib.sh"
[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || { echo "SKIPPED: no Fashion-MNIST"; exit 77; }
"$RINGTRAIN_EXE" convert idx --force -o "$WORK/fashion.h5" >/dev/null 2>&1
DATA=$WORK/fashion.h5
TRAIN_LOG_FLAGS=(--log-every 200 --check-every 500)
train 2 "$WORK/cnn" --model cnn --batch 64 --epochs "${EPOCHS:-8}" --lr 0.05 --momentum 0.9 --schedule cosine \
  --warmup 100
grep "ringtrain: done" "$WORK/cnn/log.txt"
acc=$(final_accuracy "$WORK/cnn")
"$PYTHON" -c "import sys; sys.exit(0 if float('$acc') >= 0.90 else 1)" || fail "test accuracy $acc < 0.90"
echo "PASS: cnn on Fashion-MNIST, 2 ranks: test accuracy $acc"
