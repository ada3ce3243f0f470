#!/usr/bin/env bash
# image_train_match.sh EXE COMPARE MPIRUN...
# Training on a PNG folder tree is training on the same images from IDX: the
# test writes 200 Fashion-MNIST training images (and 60 test images) from
# Debian's IDX files as a class-folder PNG tree, and the same images, in the
# order convert images stores them (class folders in name order, files in
# name order), as a small IDX file pair. Both are converted (convert images,
# convert idx) and trained with the same flags on 2 ranks, plainly and with
# an augmentation: the checkpoints are bit for bit the same, and so are the
# loss traces.
set -euo pipefail
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python
need_python_modules PIL
exe=$1 compare=$2
shift 2
work=$(mktemp -d "${TMPDIR:-/tmp}/ringtrain-match.XXXXXX")
trap 'rm -rf "$work"' EXIT; [ -z "${KEEP:-}" ] || trap - EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$PYTHON" - "$work" <<'PY' || fail "cannot write the PNG tree and the IDX subset"
import gzip, os, struct, sys
from PIL import Image
out = sys.argv[1]
fm = "/usr/share/datasets/fashion-mnist"

def idx(path):
    data = gzip.open(path, "rb").read()
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]

for split, prefix, count in (("train", "train", 200), ("test", "t10k", 60)):
    (n, h, w), pixels = idx(f"{fm}/{prefix}-images-idx3-ubyte.gz")
    _, labels = idx(f"{fm}/{prefix}-labels-idx1-ubyte.gz")
    for i in range(count):
        d = f"{out}/png/{split}/class_{labels[i]}"
        os.makedirs(d, exist_ok=True)
        Image.frombytes("L", (w, h), pixels[i * h * w:(i + 1) * h * w]).save(f"{d}/{i:05d}.png")
    # convert images' order: class folders by name, then files by name.
    order = sorted(range(count), key=lambda i: (f"class_{labels[i]}", f"{i:05d}.png"))
    img = b"".join(pixels[i * h * w:(i + 1) * h * w] for i in order)
    lab = bytes(labels[i] for i in order)
    with gzip.open(f"{out}/{split}-images.gz", "wb") as f:
        f.write(struct.pack(">BBBBIII", 0, 0, 8, 3, count, h, w) + img)
    with gzip.open(f"{out}/{split}-labels.gz", "wb") as f:
        f.write(struct.pack(">BBBBI", 0, 0, 8, 1, count) + lab)
PY

"$exe" convert images --train "$work/png/train" --test "$work/png/test" --no-progress \
  -o "$work/png.h5" > "$work/convert-png.log" 2>&1 || { cat "$work/convert-png.log"; fail "convert images"; }
grep -q "/train: 200 images of 1x28x28 uint8, 10 classes" "$work/convert-png.log" ||
  { cat "$work/convert-png.log"; fail "convert images: not 200 gray 28x28 images in 10 classes"; }
"$exe" convert idx --train-images "$work/train-images.gz" --train-labels "$work/train-labels.gz" \
  --test-images "$work/test-images.gz" --test-labels "$work/test-labels.gz" -o "$work/idx.h5" \
  > "$work/convert-idx.log" 2>&1 || { cat "$work/convert-idx.log"; fail "convert idx"; }

model='conv2d(out=8, kernel=3, padding=1); relu; max_pool2d(kernel=2); flatten; linear(out=10)'
run() {  # NAME DATA (flags in the array flags)
  local name=$1 data=$2
  "${mpirun[@]}" -np 2 "$exe" train --data "$data" --model "$model" --batch 8 --epochs 2 --max-steps 24 \
    --lr 0.05 --seed 5 --log-every 1 --device cpu --timeout 60 --ckpt-dir "$work/$name/ckpt" \
    --logdir "$work/$name" "${flags[@]}" > "$work/$name.log" 2>&1 ||
    { cat "$work/$name.log"; fail "training $name"; }
}
mpirun=("$@")
for variant in plain augmented; do
  flags=()
  [ "$variant" = plain ] || flags=(--augment "random_crop(28, padding=2), hflip" --loader-threads 2)
  run "png-$variant" "$work/png.h5"
  run "idx-$variant" "$work/idx.h5"
  "$compare" "$work/png-$variant/ckpt/ckpt-24.h5" "$work/idx-$variant/ckpt/ckpt-24.h5" --exact ||
    fail "$variant: the PNG tree and the IDX files trained to different parameters"
  losses() { "$PYTHON" -c 'import json,sys; print([r["loss"] for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "train"])' "$1"; }
  a=$(losses "$work/png-$variant/metrics.jsonl") b=$(losses "$work/idx-$variant/metrics.jsonl")
  [ "$a" = "$b" ] && [ ${#a} -gt 20 ] || fail "$variant: loss traces differ or are missing: $a / $b"
  echo "ok: $variant: bit-identical parameters after 24 steps, loss trace ${a:0:60}..."
done
echo PASS
