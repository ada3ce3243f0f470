#!/usr/bin/env bash
# gpu-pack.sh [--build DIR] [--train-images N] [--all-tests] [--pack SCRIPT]
#
# Packs a CUDA build for a lent GPU machine, small enough to travel: the
# workplace's bundle script (../shared/gpu/pack.sh --fashion) gives about 73 MiB,
# and what travels (the working tree and .gpu/ together) is limited to 64 MiB.
# This repacks its bundle, in the format and layout that bundle's run.sh unpacks:
#   - Fashion-MNIST's training set cut to its first N images (default 40000; the
#     test set stays whole), as valid IDX files in gzip's stored (uncompressed)
#     form, which xz compresses better than deflate's output; so everything that
#     reads /usr/share/datasets/fashion-mnist there sees a smaller but real set,
#     and gpu-checks.sh's accuracy goal follows the count it finds in the header
#   - libraries stored twice (merged /usr: lib/ and usr/lib/) as hard links
#   - xz -9 with a 256 MiB window instead of -6: it finds the statically linked
#     test binaries' common code (each about 19 MB, the library with its device
#     code) across all of them, where -9's 64 MiB window spanned three: the
#     bundle 63.9 -> 56.1 MiB (2026-11-29; one thread, about 4 minutes, since
#     xz's threads would cut the stream into blocks the window cannot span)
#   - the test executables a GPU round runs, not the CPU ones (launch/
#     gpu_pack_keep.py: those a test labelled gpu names or runs through its
#     scripts, and those gpu-checks.sh names; --all-tests keeps every one): each
#     links the library statically, about 0.25 MiB packed apiece, 27 MiB for
#     the build's 113 (2026-11-29); CI runs the CPU ones, and gpu-checks.sh's
#     cpusuite says it has none to run
#   - without the install tests' tree (build/tests/install: a second ringtrain
#     in a package prefix and an example built against it, 4.5 MiB packed):
#     they need CMake, which a GPU machine lacks, and gpu-checks.sh's cpusuite
#     leaves them out
# Each test binary carries the library's device code for every architecture the
# build targets; the lent GPUs (H100, H200) are sm_90, and a build with
# -DRINGTRAIN_CUDA_ARCHS=90 packs about half the device code of the default
# "80;90" (2026-11-29: 80.6 MiB with both, over the limit). It says so when the
# build targets more.
# and fails (exit 1) if the result and the working tree do not fit.
# RINGTRAIN_GPU_DIR: where the bundle script leaves bundle.tar.xz (default .gpu/;
# set by the test, whose stand-in for the bundle script writes there).
#
# Then, with the device tool: run with carry [".gpu"] and
#   bash .gpu/run.sh 'launch/gpu-checks.sh --budget 460 --tar $OUT/gpu-checks.tgz /tmp/gc'
set -euo pipefail
build=build train_images=40000 all_tests=0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=launch/env.sh
source "$root/launch/env.sh"  # RINGTRAIN_PYTHON
pack=$root/../shared/gpu/pack.sh
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --train-images) train_images=$2; shift 2 ;;
    --all-tests) all_tests=1; shift ;;
    --pack) pack=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu-pack.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ $train_images =~ ^[0-9]+$ ]] && [ "$train_images" -ge 1000 ] && [ "$train_images" -le 60000 ] \
  || { echo "gpu-pack.sh: --train-images must be 1000..60000, not '$train_images'" >&2; exit 2; }
[ -x "$pack" ] || { echo "gpu-pack.sh: no bundle script at $pack (--pack SCRIPT)" >&2; exit 2; }
cd "$root"
limit=$((64 * 1024 * 1024))

archs=$(sed -n 's/^RINGTRAIN_CUDA_ARCHS:STRING=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ -n "$archs" ] && [ "$archs" != 90 ]; then
  echo "gpu-pack.sh: $build targets CUDA architectures '$archs'; the lent GPUs are sm_90, and" \
    "'cmake -DRINGTRAIN_CUDA_ARCHS=90 $build' packs about half the device code" >&2
fi

"$pack" --build "$build" --fashion
bundle=${RINGTRAIN_GPU_DIR:-$root/.gpu}/bundle.tar.xz
[ -s "$bundle" ] || { echo "gpu-pack.sh: $pack left no $bundle" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage" "$bundle.tmp"' EXIT
tar xJf "$bundle" -C "$stage"

"$RINGTRAIN_PYTHON" - "$stage/data" "$train_images" <<'PY'
import glob, gzip, struct, sys
folder, keep = sys.argv[1], int(sys.argv[2])
for path in sorted(glob.glob(f"{folder}/*-idx*-ubyte.gz")):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    header = bytearray(raw[:4 + 4 * raw[3]])
    count = struct.unpack(">I", header[4:8])[0]
    item_bytes = (len(raw) - len(header)) // count
    if "/train-" in path and keep < count:
        header[4:8] = struct.pack(">I", keep)
        raw = bytes(header) + raw[len(header):len(header) + keep * item_bytes]
        print(f"gpu-pack.sh: {path.rsplit('/', 1)[1]}: first {keep} of {count}")
    # stored, not deflated: xz then compresses the pixels themselves (the
    # bundle came out 3 MiB smaller than over deflate's output), and it is
    # still a gzip file
    with gzip.open(path, "wb", compresslevel=0) as f:
        f.write(raw)
PY

rm -rf "${stage:?}/proj/$build/tests/install"
if [ $all_tests = 0 ]; then
  keep=$( (cd "$build" && ctest --show-only=json-v1 -L gpu) \
    | "$RINGTRAIN_PYTHON" "$root/launch/gpu_pack_keep.py" "$build" "$root")
  dropped=0
  while IFS= read -r -d '' f; do
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    grep -qxF "${f#"$stage/proj/$build/"}" <<< "$keep" && continue
    rm -f "$f"
    dropped=$((dropped + 1))
  done < <(find "$stage/proj/$build/tests" -type f -perm -u+x -print0 2>/dev/null)
  printf '%s\n' "$keep" > "$stage/proj/$build/gpu-pack-tests.txt"
  echo "gpu-pack.sh: $dropped CPU test executables left behind, $(grep -c . <<< "$keep") GPU ones kept (--all-tests keeps all)"
fi
# What was packed, so that a device call can say which commit it runs (the
# bundle's tracked files are those of the packing, not of a later edit).
git describe --always --dirty > "$stage/proj/$build/gpu-pack-source.txt" 2> /dev/null || true

# Where merged /usr gave the same library twice, keep one copy (tar stores the
# second as a hard link, and unpacks it as one).
while IFS= read -r -d '' f; do
  twin=$stage/sys/usr/${f#"$stage/sys/"}
  if [ -f "$twin" ] && cmp -s "$f" "$twin"; then ln -f "$twin" "$f"; fi
done < <(find "$stage/sys/lib" "$stage/sys/bin" "$stage/sys/sbin" -type f -print0 2>/dev/null)

tar -C "$stage" -cf - . | xz -T1 --lzma2=preset=9,dict=256MiB > "$bundle.tmp"
mv "$bundle.tmp" "$bundle"

size=$(stat -c %s "$bundle")
tree=0
if git rev-parse --git-dir > /dev/null 2>&1; then
  tree=$(git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null | awk '{s += $1} END {print s + 0}')
else
  echo "gpu-pack.sh: warning: not a git checkout, so the working tree's size is not counted" >&2
fi
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "gpu-pack.sh: bundle $(mib "$size") + working tree $(mib "$tree") = $(mib $((size + tree))) (limit 64 MiB)"
[ $((size + tree)) -le $limit ] || { echo "gpu-pack.sh: too large to travel: pass a smaller --train-images" >&2; exit 1; }
