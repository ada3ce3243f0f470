#!/usr/bin/env bash
# --layout nhwc (channels-last) against nchw on the CPU, in whole training
# runs: resnet20 (conv, BatchNorm, residual adds, global average pool) on 2
# ranks gives the same losses, parameters and running statistics within float
# tolerance, and so does inception3's concat path (1 rank, 75x75, 2 steps);
# the start-up line says which layout runs; the checkpoint evaluates the same
# under either layout; a bad --layout exits 2 naming it.
# On this CPU path the two are in fact bit for bit (oneDNN reorders either
# layout into the same blocked one; BatchNorm, the pools and the global pool
# sum each channel in the same order), but that depends on oneDNN's choice of
# kernel for the machine, so the test asks for float tolerance only.
source "$(dirname "$0")/lib.sh"

# The logged training losses, one per step.
losses() {
  "$PYTHON" -c 'import json,sys
print(" ".join(str(r["loss"]) for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"))' \
    "$1/metrics.jsonl"
}
# shellcheck disable=SC2034 # read by train() in lib.sh
TRAIN_LOG_FLAGS=(--log-every 1 --check-every 2)

# 1. resnet20, 2 ranks x 8, 6 steps with momentum.
r20=(--model resnet20 --batch 8 --epochs 10 --max-steps 6 --lr 0.05 --momentum 0.9 --seed 3)
for layout in nchw nhwc; do train 2 "$WORK/r20-$layout" --layout "$layout" "${r20[@]}"; done
grep -q "activations nhwc (--layout nhwc)" "$WORK/r20-nhwc/log.txt" \
  || { cat "$WORK/r20-nhwc/log.txt"; fail "the start-up lines do not say nhwc"; }
grep -q "activations nchw (--layout nchw)" "$WORK/r20-nchw/log.txt" || fail "the start-up lines do not say nchw"
"$PYTHON" - "$(losses "$WORK/r20-nchw")" "$(losses "$WORK/r20-nhwc")" <<'PY' || fail "resnet20: the losses differ"
import sys
a, b = ([float(v) for v in s.split()] for s in sys.argv[1:3])
assert len(a) == len(b) == 6, (a, b)
for x, y in zip(a, b):
    assert abs(x - y) <= 1e-4 * abs(x) + 1e-5, (a, b)
print("resnet20 losses nchw", a, "nhwc", b)
PY
same "$WORK/r20-nchw" "$WORK/r20-nhwc" --rtol 1e-3 --atol 1e-5
# The checkpoint is the same in either layout: the nhwc run's evaluates to the
# same figures under --layout nchw and nhwc.
ck=$(newest "$WORK/r20-nhwc/ckpt")
for layout in nchw nhwc; do
  "${MPIRUN[@]}" -np 1 "$RINGTRAIN_EXE" eval --device cpu --data "$DATA" --ckpt "$ck" --layout "$layout" \
    > "$WORK/eval-$layout.txt" 2>&1 || { cat "$WORK/eval-$layout.txt"; fail "eval --layout $layout failed"; }
done
a=$(grep -m1 -Eo 'n=[0-9]+ loss=[0-9.]+ accuracy=[0-9.]+' "$WORK/eval-nchw.txt")
b=$(grep -m1 -Eo 'n=[0-9]+ loss=[0-9.]+ accuracy=[0-9.]+' "$WORK/eval-nhwc.txt")
[ -n "$a" ] && [ "$a" = "$b" ] || { cat "$WORK"/eval-*.txt; fail "eval: nchw '$a', nhwc '$b'"; }
echo "eval of the nhwc checkpoint: $a in both layouts"

# 2. inception3 (concat of four branches, factorised 1x7/7x1 convolutions,
# average pools with padding) at its smallest input.
INC=$WORK/inception.h5
"$RINGTRAIN_EXE" convert synthetic --force --n 8 --test-n 3 --shape 3,75,75 --classes 3 --seed 2 -o "$INC" \
  >/dev/null 2>&1 || fail "could not make the 75x75 data set"
for layout in nchw nhwc; do
  DATA=$INC train 1 "$WORK/inc-$layout" --model inception3 --layout "$layout" --batch 2 --max-steps 2 \
    --lr 0.01 --momentum 0.9 --seed 4
done
"$PYTHON" - "$(losses "$WORK/inc-nchw")" "$(losses "$WORK/inc-nhwc")" <<'PY' || fail "inception3: the losses differ"
import sys
a, b = ([float(v) for v in s.split()] for s in sys.argv[1:3])
assert len(a) == len(b) == 2, (a, b)
for x, y in zip(a, b):
    assert abs(x - y) <= 1e-4 * abs(x) + 1e-5, (a, b)
print("inception3 losses nchw", a, "nhwc", b)
PY
same "$WORK/inc-nchw" "$WORK/inc-nhwc" --rtol 1e-3 --atol 1e-5

# 3. A bad value: exit 2, the flag and the value named, at once.
rc=0
"$RINGTRAIN_EXE" train --data "$DATA" --model "$CNN" --device cpu --layout chw > "$WORK/bad.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] || { cat "$WORK/bad.txt"; fail "--layout chw: exit code $rc, expected 2"; }
grep -q -- "--layout" "$WORK/bad.txt" && grep -q "chw" "$WORK/bad.txt" \
  || { cat "$WORK/bad.txt"; fail "--layout chw: the message does not name the flag and value"; }
for cmd in "eval --ckpt x.h5" "predict --ckpt x.h5" "bench step --model cnn"; do
  rc=0
  # shellcheck disable=SC2086 # the subcommand and its arguments, split on purpose
  "$RINGTRAIN_EXE" $cmd --data "$DATA" --layout nhcw > "$WORK/bad2.txt" 2>&1 || rc=$?
  [ $rc -eq 2 ] && grep -q -- "--layout" "$WORK/bad2.txt" \
    || { cat "$WORK/bad2.txt"; fail "$cmd --layout nhcw: exit code $rc, or no --layout in the message"; }
done
echo "PASS: resnet20 and inception3 train the same in nhwc as in nchw; bad --layout exits 2"
