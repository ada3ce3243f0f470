#!/usr/bin/env bash
# augment_determinism.sh EXE FIXTURES SPEC MPIRUN...
# data inspect --dump writes the float32 values each rank feeds the model per
# sample index, as .npy files that numpy.load reads with their shape. 1 rank x 1 loader thread and 3 ranks x 4 threads must give the
# same file for every sample both runs read; another epoch must differ. The
# same holds for JPEG storage (decoded on the loader threads).
set -euo pipefail
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python
exe=$1 fixtures=$2 spec=$3
shift 3
work=$fixtures/augment
rm -rf "$work"
mkdir -p "$work"
"$exe" convert images --train "$fixtures/fashion/train" --test "$fixtures/fashion/test" \
  --size 32,32 --channels 3 --no-progress -o "$work/set.h5" > /dev/null
"$exe" data inspect --data "$work/set.h5" --batch 8 --epoch 2 --seed 9 --augment "$spec" \
  --loader-threads 1 --dump "$work/np1" > /dev/null
"$@" -np 3 "$exe" data inspect --data "$work/set.h5" --batch 8 --epoch 2 --seed 9 \
  --augment "$spec" --loader-threads 4 --dump "$work/np3" > /dev/null
"$exe" data inspect --data "$work/set.h5" --batch 8 --epoch 3 --seed 9 --augment "$spec" \
  --dump "$work/epoch3" > /dev/null
same=0 differ=0
for f in "$work"/np3/*.npy; do
  b=$(basename "$f")
  [ -f "$work/np1/$b" ] || continue
  if cmp -s "$f" "$work/np1/$b"; then same=$((same + 1)); else differ=$((differ + 1)); echo "differs: $b"; fi
done
other=0
for f in "$work"/epoch3/*.npy; do
  b=$(basename "$f")
  [ -f "$work/np1/$b" ] && ! cmp -s "$f" "$work/np1/$b" && other=$((other + 1))
done
size=$(stat -c %s "$work/np1/0.npy" 2>/dev/null || stat -c %s "$(ls "$work"/np1/*.npy | head -1)")
echo "samples equal at 1 and 3 ranks: $same, different: $differ; changed in epoch 3: $other; $size bytes each"
# 128 bytes of .npy header, then the values.
[ "$same" -ge 250 ] && [ "$differ" -eq 0 ] && [ "$other" -ge 250 ] && [ "$size" -eq $((128 + 3 * 24 * 24 * 4)) ] ||
  { echo FAIL; exit 1; }
"$PYTHON" -c 'import numpy, sys; a = numpy.load(sys.argv[1]); assert a.shape == (3, 24, 24) and a.dtype == numpy.float32, (a.shape, a.dtype); print("numpy.load:", a.shape, a.dtype)' "$work/np1/0.npy" ||
  { echo "FAIL: numpy.load of a --dump file"; exit 1; }

"$exe" convert images --train "$fixtures/fashion/train" --test "$fixtures/fashion/test" \
  --size 32,32 --channels 3 --store jpeg --no-progress -o "$work/jpeg.h5" > /dev/null
"$exe" data inspect --data "$work/jpeg.h5" --batch 8 --epoch 2 --seed 9 --augment "$spec" \
  --dump "$work/jpeg1" > /dev/null
"$@" -np 3 "$exe" data inspect --data "$work/jpeg.h5" --batch 8 --epoch 2 --seed 9 \
  --augment "$spec" --loader-threads 4 --dump "$work/jpeg3" > /dev/null
same=0 differ=0
for f in "$work"/jpeg3/*.npy; do
  b=$(basename "$f")
  [ -f "$work/jpeg1/$b" ] || continue
  if cmp -s "$f" "$work/jpeg1/$b"; then same=$((same + 1)); else differ=$((differ + 1)); fi
done
echo "JPEG storage: samples equal at 1 and 3 ranks: $same, different: $differ"
[ "$same" -ge 250 ] && [ "$differ" -eq 0 ] && echo PASS
