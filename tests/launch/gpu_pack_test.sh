#!/usr/bin/env bash
# gpu_pack_test.sh ROOT: launch/gpu-pack.sh on a stand-in for the workplace's bundle
# script. The training set must come out cut to its first N images as valid IDX
# (header count and the same bytes), the test set whole, both still gzip files;
# a library stored twice must unpack as one file with two names; the install
# tests' tree and the CPU-only test executables must stay behind, what
# gpu-checks.sh names travel; a bad count is
# refused with exit 2.
set -euo pipefail
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python
root=$1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export RINGTRAIN_GPU_DIR=$work/gpu
cat > "$work/pack.sh" <<'PACK'
#!/usr/bin/env bash
set -euo pipefail
s=$(mktemp -d)
trap 'rm -rf "$s"' EXIT
mkdir -p "$s/proj" "$s/sys/lib/x86_64-linux-gnu" "$s/sys/usr/lib/x86_64-linux-gnu" "$s/data"
echo /nowhere > "$s/proj/.origin"
mkdir -p "$s/proj/build/tests/install/package" "$s/proj/build/tests/model" "$s/proj/build/tests/trainer"
echo installed > "$s/proj/build/tests/install/package/ringtrain"
echo kept > "$s/proj/build/tests/model/a_test"
# ELF executables: one that gpu-checks.sh names, one that no GPU test runs
cp /bin/true "$s/proj/build/tests/trainer/compare_checkpoints"
cp /bin/true "$s/proj/build/tests/model/cpu_only_test"
head -c 200000 /dev/urandom > "$s/sys/usr/lib/x86_64-linux-gnu/libtwin.so.1"
cp "$s/sys/usr/lib/x86_64-linux-gnu/libtwin.so.1" "$s/sys/lib/x86_64-linux-gnu/libtwin.so.1"
"$RINGTRAIN_PYTHON" - "$s/data" <<'PY'
import gzip, struct, sys
def write(path, dims, items):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">BBBB", 0, 0, 8, len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + items)
for prefix, n in (("train", 3000), ("t10k", 500)):
    pixels = bytes((i * 7 + 3 * (i // 784)) % 256 for i in range(n * 784))
    write(f"{sys.argv[1]}/{prefix}-images-idx3-ubyte.gz", (n, 28, 28), pixels)
    write(f"{sys.argv[1]}/{prefix}-labels-idx1-ubyte.gz", (n,), bytes(i % 10 for i in range(n)))
PY
mkdir -p "$RINGTRAIN_GPU_DIR"
tar -C "$s" -cf - . | xz > "$RINGTRAIN_GPU_DIR/bundle.tar.xz"
PACK
chmod +x "$work/pack.sh"

"$root/launch/gpu-pack.sh" --pack "$work/pack.sh" --train-images 1000 | tee "$work/pack.log"
grep -q "bundle .* MiB + working tree .* MiB = .* MiB (limit 64 MiB)" "$work/pack.log"
mkdir "$work/out"
tar xJf "$RINGTRAIN_GPU_DIR/bundle.tar.xz" -C "$work/out"
"$PYTHON" - "$work/out/data" <<'PY'
import gzip, struct, sys
def read(path):
    raw = gzip.open(path).read()
    dims = struct.unpack(">" + "I" * raw[3], raw[4:4 + 4 * raw[3]])
    return dims, raw[4 + 4 * raw[3]:]
for prefix, n in (("train", 1000), ("t10k", 500)):
    dims, pixels = read(f"{sys.argv[1]}/{prefix}-images-idx3-ubyte.gz")
    assert dims == (n, 28, 28), (prefix, dims)
    assert pixels == bytes((i * 7 + 3 * (i // 784)) % 256 for i in range(n * 784)), prefix + " pixels differ"
    dims, labels = read(f"{sys.argv[1]}/{prefix}-labels-idx1-ubyte.gz")
    assert dims == (n,) and labels == bytes(i % 10 for i in range(n)), prefix + " labels differ"
print("PASS: train cut to 1000 images, t10k whole, bytes unchanged")
PY
links=$(stat -c %h "$work/out/sys/lib/x86_64-linux-gnu/libtwin.so.1")
[ "$links" = 2 ] || { echo "FAIL: the twin library unpacks as $links link(s), not one file with 2 names"; exit 1; }
cmp "$work/out/sys/lib/x86_64-linux-gnu/libtwin.so.1" "$work/out/sys/usr/lib/x86_64-linux-gnu/libtwin.so.1"
echo "PASS: twin libraries stored once"
[ ! -e "$work/out/proj/build/tests/install" ] || { echo "FAIL: the install tests' tree travelled"; exit 1; }
[ "$(cat "$work/out/proj/build/tests/model/a_test")" = kept ] || { echo "FAIL: a non-executable file was lost"; exit 1; }
echo "PASS: the install tests' tree left behind"
[ -x "$work/out/proj/build/tests/trainer/compare_checkpoints" ] || { echo "FAIL: compare_checkpoints (named by gpu-checks.sh) was left behind"; exit 1; }
[ ! -e "$work/out/proj/build/tests/model/cpu_only_test" ] || { echo "FAIL: a CPU-only test executable travelled"; exit 1; }
grep -qx tests/trainer/compare_checkpoints "$work/out/proj/build/gpu-pack-tests.txt"
echo "PASS: the GPU round's test executables kept, a CPU-only one left behind"

rc=0
"$root/launch/gpu-pack.sh" --pack "$work/pack.sh" --train-images 12 > "$work/bad.log" 2>&1 || rc=$?
[ $rc = 2 ] && grep -q -- "--train-images must be" "$work/bad.log" || { cat "$work/bad.log"; echo "FAIL: exit $rc"; exit 1; }
echo "PASS: a bad --train-images is refused with exit 2"
