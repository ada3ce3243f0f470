#!/usr/bin/env bash
# install_example.sh PREFIX EXAMPLE_SRC WORK MPIRUN...
# The example project, copied out of the source tree and built against the
# installed package at PREFIX only. Then:
#   1. its gradient check of the layer passes (ringtrain's public helper);
#   2. `ringtrain train --plugin` and the example's own loop, same seed and
#      global batch (2 ranks x 32), give the same parameters after 20 steps;
#   3. the own loop reaches the stated accuracy on Fashion-MNIST, 2 ranks.
# Skips (77) without Debian's Fashion-MNIST package.
set -euo pipefail
prefix=$1; example_src=$2; work=$3; shift 3
mpirun=("$@")
fashion=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
[ -e "$fashion" ] || { echo "SKIPPED: no Fashion-MNIST (Debian package dataset-fashion-mnist)"; exit 77; }
min_accuracy=0.78

rm -rf "$work"; mkdir -p "$work"
cp -r "$example_src" "$work/example"
cmake -S "$work/example" -B "$work/example/build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_BUILD_TYPE=Release >"$work/configure.log"
cmake --build "$work/example/build" -j2 >"$work/build.log" || { cat "$work/build.log"; exit 1; }
bin=$work/example/build

echo "== 1. gradient check of the plugin's layer"
"$bin/gradient_check"

"$prefix/bin/ringtrain" convert idx -o "$work/fashion.h5" >/dev/null
model="input(1, 28, 28); flatten; linear(out=64); layernorm; relu; linear(out=10)"
common=(--batch 32 --seed 42 --lr 0.05)

echo "== 2. ringtrain train --plugin vs the own loop, 20 steps"
"${mpirun[@]}" -np 2 "$prefix/bin/ringtrain" train --plugin "$bin/liblayernorm_plugin.so" \
  --data "$work/fashion.h5" --model "$model" "${common[@]}" --momentum 0.9 --bucket-mb 1 \
  --max-steps 20 --ckpt-dir "$work/plugin-ckpt" | tail -n 3
"${mpirun[@]}" -np 2 "$bin/train_own_loop" --data "$work/fashion.h5" --model "$model" \
  "${common[@]}" --steps 20 --compare "$work/plugin-ckpt/ckpt-20.h5" | tail -n 3

echo "== 3. the own loop on Fashion-MNIST, 2 ranks, to test accuracy >= $min_accuracy"
out=$("${mpirun[@]}" -np 2 "$bin/train_own_loop" --data "$work/fashion.h5" --model "$model" \
  "${common[@]}" --steps 400 --ckpt-dir "$work/own-ckpt" --min-accuracy "$min_accuracy")
printf '%s\n' "$out" | tail -n 4
[ -s "$work/own-ckpt/ckpt-400.h5" ] || { echo "FAIL: no checkpoint ckpt-400.h5"; exit 1; }
echo "PASS"
