# Shared by the trainer tests: a scratch directory, a small learnable data set
# and helpers that run `ringtrain train` under mpirun and compare checkpoints.
# Sourced by each test script; RINGTRAIN_EXE and COMPARE are set by ctest.
set -euo pipefail
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python
: "${RINGTRAIN_EXE:?}" "${COMPARE:?}"
MPIRUN=(mpirun --oversubscribe --bind-to none)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ringtrain-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
# The convolutions' engines chosen by time on a GPU are remembered in this
# file (ops/conv_engine_record.h): every run of a test takes the first run's
# engines, so that runs compared bit for bit run the same ones, and no test
# reads or writes the user's own record.
export RINGTRAIN_CONV_CACHE=$WORK/conv-engines.tsv
fail() { echo "FAIL: $*" >&2; exit 1; }

# 256 training samples of 1x8x8 in 4 classes, 101 test samples (not divisible
# by 2, 3 or 4, so evaluation shards are uneven).
DATA=$WORK/data.h5
"$RINGTRAIN_EXE" convert synthetic --force --n 256 --test-n 101 --shape 1,8,8 --classes 4 --seed 7 -o "$DATA" >/dev/null 2>&1 \
  || fail "could not make the synthetic data set"

MLP="mlp:64-32-4"
CNN="conv2d(out=4, kernel=3, padding=1); relu; max_pool2d(kernel=2); flatten; linear(out=4)"

# Logging and replica-check cadence for train(); a test may set its own.
TRAIN_LOG_FLAGS=(--log-every 5 --check-every 5)

# train NP OUTDIR [train flags...]: runs, keeps the log, leaves OUTDIR/ckpt/ckpt-<step>.h5.
# Every run names --device cpu (TRAIN_DEVICE=cuda for gpu tests): on a GPU host, auto would pick the GPUs and the
# CPU backends and -np 4 would not fit them.
train() {
  local np=$1 out=$2
  shift 2
  # ctest -j counts a test as its PROCESSORS: more ranks than that would
  # oversubscribe the machine into timeouts when tests run side by side.
  [ -z "${RINGTRAIN_TEST_PROCESSORS:-}" ] || [ "$np" -le "$RINGTRAIN_TEST_PROCESSORS" ] \
    || fail "train -np $np, but the test declares PROCESSORS $RINGTRAIN_TEST_PROCESSORS (tests/trainer/CMakeLists.txt)"
  mkdir -p "$out"
  if ! "${MPIRUN[@]}" -np "$np" "$RINGTRAIN_EXE" train --data "$DATA" --ckpt-dir "$out/ckpt" --keep 100 \
        --logdir "$out" --timeout 60 --device "${TRAIN_DEVICE:-cpu}" "${TRAIN_LOG_FLAGS[@]}" "$@" > "$out/log.txt" 2>&1; then
    cat "$out/log.txt"
    fail "train -np $np $* failed"
  fi
}

# run_fail NAME [mpirun args...]: the run must fail, not hang (at most 120 s);
# its log is kept in $WORK/NAME/log.txt.
run_fail() {
  local name=$1 rc=0
  shift
  mkdir -p "$WORK/$name"
  timeout -k 5 120 "${MPIRUN[@]}" "$@" > "$WORK/$name/log.txt" 2>&1 || rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat "$WORK/$name/log.txt"; fail "$name: exit code $rc"; }
}

# newest DIR: the checkpoint of the highest step in DIR.
newest() { ls "$1"/ckpt-*.h5 2>/dev/null | sort -V | tail -1; }

# same A B [compare flags...]: the final checkpoints of two runs match
same() {
  local a b
  a=$(ls "$1"/ckpt/ckpt-*.h5 | sort -V | tail -1)
  b=$(ls "$2"/ckpt/ckpt-*.h5 | sort -V | tail -1)
  shift 2
  "$COMPARE" "$a" "$b" "$@" || fail "checkpoints differ: $a $b"
}

# The test accuracy of a run's last evaluation, from metrics.jsonl.
final_accuracy() {
  "$PYTHON" -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([r for r in rows if r.get("kind")=="eval"][-1]["accuracy"])' "$1/metrics.jsonl"
}
