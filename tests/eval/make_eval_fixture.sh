#!/usr/bin/env bash
# make_eval_fixture.sh DIR RINGTRAIN MPIRUN...
# Builds what the eval tests read: a synthetic 1x8x8, 4-class set whose test
# split has 203 samples (odd, and not divisible by 3), the same set at 1x6x6,
# a checkpoint of a model for the 1x6x6 set, and a 2-rank training run with an evaluation and a checkpoint every 5 steps
# (steps 5..30; 30 is the run's final, finished checkpoint).
set -euo pipefail
dir=$1 exe=$2
shift 2
rm -rf "$dir"
mkdir -p "$dir/empty"
"$exe" convert synthetic --force --n 600 --test-n 203 --shape 1,8,8 --classes 4 --seed 11 --noise 1.5 -o "$dir/d.h5"
"$exe" convert synthetic --force --n 60 --test-n 31 --shape 1,6,6 --classes 4 --seed 12 -o "$dir/d66.h5"
"$@" -np 2 "$exe" train --device cpu --data "$dir/d.h5" --model mlp:64-16-4 --batch 8 --max-steps 30 --lr 0.05 \
  --eval-every 5 --ckpt-every 5 --keep 100 --ckpt-dir "$dir/run/ckpt" --logdir "$dir/run" --seed 5
ls "$dir/run/ckpt"
[ "$(find "$dir/run/ckpt" -name 'ckpt-*.h5' | wc -l)" -eq 6 ] || { echo "expected 6 checkpoints"; exit 1; }
# A checkpoint of a model for 1x6x6 samples: readable, but it does not fit d.h5.
"$exe" train --device cpu --data "$dir/d66.h5" --model mlp:36-8-4 --batch 8 --max-steps 2 --ckpt-dir "$dir/run66/ckpt"
cp "$(find "$dir/run66/ckpt" -name 'ckpt-*.h5' | head -n 1)" "$dir/other_model.h5"
# A checkpoint cut short, as a crash during a non-atomic copy would leave it.
head -c 3000 "$dir/run/ckpt/ckpt-10.h5" >"$dir/truncated.h5"
echo "fixture ready in $dir"
