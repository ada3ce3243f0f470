#!/usr/bin/env bash
# --precision bf16|fp16 on the CPU path (low-precision storage emulated by
# rounding to the 16-bit grid): training runs and lands near fp32; fp16's loss
# scaler grows, backs off and skips an overflow step (an injected one, and a
# real one from too large an initial scale) without counting it as
# non-finite; resume is bit-exact with the scaler's state; bad values exit 2.
source "$(dirname "$0")/lib.sh"
need_python_modules h5py numpy
common=(--model "$CNN" --batch 8 --epochs 100 --lr 0.05 --momentum 0.9 --seed 5)
# shellcheck disable=SC2034 # read by train() in lib.sh
TRAIN_LOG_FLAGS=(--log-every 1 --check-every 4)

# 1. bf16 and fp16 train, and the loss falls like fp32's; the parameters end
# within the 16-bit formats' tolerance of fp32's.
for p in fp32 bf16 fp16; do
  train 2 "$WORK/$p" --max-steps 24 --precision "$p" "${common[@]}"
done
"$PYTHON" - "$WORK" <<'PY' || fail "low-precision training does not track fp32"
import json, sys
def losses(p):
    rows = [json.loads(l) for l in open(f"{sys.argv[1]}/{p}/metrics.jsonl") if l.strip()]
    return [r["loss"] for r in rows if r["kind"] == "train"]
ref = losses("fp32")
for p in ("bf16", "fp16"):
    l = losses(p)
    assert len(l) == 24, (p, len(l))
    first, last = sum(l[:4]) / 4, sum(l[-4:]) / 4
    assert last < 0.8 * first, (p, "loss did not fall", first, last)
    ref_last = sum(ref[-4:]) / 4
    assert abs(last - ref_last) < 0.15 * ref_last + 0.05, (p, "far from fp32", last, ref_last)
    print(f"{p}: loss {first:.4f} -> {last:.4f} (fp32 {ref_last:.4f})")
PY
"$PYTHON" - "$(newest "$WORK/fp32/ckpt")" "$(newest "$WORK/bf16/ckpt")" "$(newest "$WORK/fp16/ckpt")" <<'PY' \
  || fail "low-precision parameters are not near fp32's"
import sys, h5py, numpy as np
def params(path):
    with h5py.File(path, "r") as f:
        g = f["params"]
        return np.concatenate([np.asarray(g[k]).ravel() for k in sorted(g)])
ref = params(sys.argv[1])
for name, path, tol in (("bf16", sys.argv[2], 0.05), ("fp16", sys.argv[3], 0.01)):
    p = params(path)
    rel = np.linalg.norm(p - ref) / np.linalg.norm(ref)
    print(f"{name}: parameters within {rel:.2e} of fp32 (relative L2)")
    assert 0 < rel < tol, (name, rel)
PY
grep -q "loss scale" "$WORK/bf16/log.txt" && fail "bf16 must not scale the loss"
grep -Eq "loss scale 65536" "$WORK/fp16/log.txt" || { cat "$WORK/fp16/log.txt"; fail "fp16: the progress line does not show the loss scale"; }

# 2. An injected overflow (an Inf-producing NaN in rank 1's gradients at step
# 3) under fp16 with growth every 2 clean steps: steps 1-2 grow the scale to
# 2^17, step 3 is skipped and halves it, 4-5 grow it again. It is not a
# non-finite failure: the default --nonfinite stop does not stop, and the
# skipped step leaves the parameters of step 2.
export RINGTRAIN_FAULT_NAN_RANK=1 RINGTRAIN_FAULT_NAN_STEP=3 RINGTRAIN_FAULT_NAN_COUNT=1
MPIRUN+=(-x RINGTRAIN_FAULT_NAN_RANK -x RINGTRAIN_FAULT_NAN_STEP -x RINGTRAIN_FAULT_NAN_COUNT)
# shellcheck disable=SC2034 # read by train() in lib.sh
TRAIN_LOG_FLAGS=(--log-every 1 --check-every 1)
train 2 "$WORK/overflow" --max-steps 6 --ckpt-every 1 --precision fp16 --loss-scale-window 2 "${common[@]}"
"$COMPARE" "$WORK/overflow/ckpt/ckpt-3.h5" "$WORK/overflow/ckpt/ckpt-2.h5" --exact --any-step \
  || fail "overflow: the skipped step 3 changed the parameters of step 2"
"$COMPARE" "$WORK/overflow/ckpt/ckpt-4.h5" "$WORK/overflow/ckpt/ckpt-3.h5" --exact --any-step > /dev/null \
  && fail "overflow: step 4 did not update the parameters"
grep -q "non-finite" "$WORK/overflow/log.txt" && { cat "$WORK/overflow/log.txt"; fail "overflow: reported as a non-finite failure"; }
"$PYTHON" - "$WORK/overflow/metrics.jsonl" <<'PY' || fail "overflow: the loss scale does not follow the scaler's rule"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t = {r["step"]: r for r in rows if r["kind"] == "train"}
scales = [t[s]["loss_scale"] for s in range(1, 7)]
assert scales == [65536, 131072, 65536, 65536, 131072, 131072], scales
assert [t[s]["overflow_steps"] for s in range(1, 7)] == [0, 0, 1, 1, 1, 1], t
assert all(t[s]["skipped_steps"] == 0 for s in t), "an overflow counted as a non-finite skip"
assert all(math.isfinite(r["loss"]) for r in t.values()), t
PY
unset RINGTRAIN_FAULT_NAN_RANK RINGTRAIN_FAULT_NAN_STEP RINGTRAIN_FAULT_NAN_COUNT
MPIRUN=(mpirun --oversubscribe --bind-to none)

# 3. A real overflow: an initial scale of 2^24 overflows fp16's activation
# gradients; the scaler backs off until they fit, then training proceeds.
train 2 "$WORK/real" --max-steps 16 --precision fp16 --loss-scale-init 16777216 "${common[@]}"
"$PYTHON" - "$WORK/real/metrics.jsonl" <<'PY' || fail "real overflow: the scaler did not back off into range"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
t = [r for r in rows if r["kind"] == "train"]
over = t[-1]["overflow_steps"]
assert 1 <= over <= 12, over
assert t[-1]["loss_scale"] == 16777216 / 2 ** over, (t[-1]["loss_scale"], over)
assert t[-1]["loss"] < t[over]["loss"], "no training after the back-off"
print(f"real overflow: {over} overflow step(s), final scale {t[-1]['loss_scale']:g}")
PY

# 4. Resume with the scaler's state is bit-exact: 8 steps straight equal 4,
# stop, resume, 4 more (the scale grows at step 3 and 6 with window 3).
sc=(--precision fp16 --loss-scale-window 3 "${common[@]}")
train 2 "$WORK/full" --max-steps 8 "${sc[@]}"
train 2 "$WORK/half" --max-steps 4 "${sc[@]}"
train 2 "$WORK/half" --max-steps 8 --resume latest "${sc[@]}"
same "$WORK/full" "$WORK/half" --exact
a=$(grep '"step":8' "$WORK/full/metrics.jsonl" | grep -o '"loss_scale":[0-9.e+]*')
b=$(grep '"step":8' "$WORK/half/metrics.jsonl" | grep -o '"loss_scale":[0-9.e+]*')
[ -n "$a" ] && [ "$a" = "$b" ] || fail "resume: loss scale $b, uninterrupted $a"
[ "$a" = '"loss_scale":262144.0' ] || fail "resume: expected the scale 2^18 at step 8 (two growths), got $a"

# 5. fp16 composes with ZeRO-1 and clipping (clipped at the scaled norm before
# the gradients are unscaled): the same parameters with and without --zero 1.
# shellcheck disable=SC2034 # read by train() in lib.sh
TRAIN_LOG_FLAGS=(--log-every 4 --check-every 4)
train 2 "$WORK/clip" --max-steps 8 --precision fp16 --clip-norm 0.5 --optimizer adamw --lr 0.01 "${common[@]:0:6}"
train 2 "$WORK/clip_zero" --max-steps 8 --precision fp16 --clip-norm 0.5 --optimizer adamw --lr 0.01 --zero 1 "${common[@]:0:6}"
same "$WORK/clip" "$WORK/clip_zero" --rtol 1e-5 --atol 1e-7
"$PYTHON" - "$WORK/clip/metrics.jsonl" <<'PY' || fail "clip: the logged norm is not the unscaled gradients' norm"
import json, sys
t = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
assert all(0 < r["grad_norm"] < 100 for r in t), [r["grad_norm"] for r in t]
PY

# 6. Bad values: exit 2 with a message naming the flag.
for bad in "--precision fp8" "--loss-scale-init -1" "--loss-scale-window 0"; do
  rc=0
  # shellcheck disable=SC2086 # split the flag from its value
  "$RINGTRAIN_EXE" train --data "$DATA" --model "$CNN" --device cpu $bad > "$WORK/bad.txt" 2>&1 || rc=$?
  [ $rc -eq 2 ] || { cat "$WORK/bad.txt"; fail "$bad: exit $rc, expected 2"; }
  grep -q -- "${bad%% *}" "$WORK/bad.txt" || { cat "$WORK/bad.txt"; fail "$bad: the message does not name the flag"; }
done
echo "PASS: bf16/fp16 train near fp32; the loss scaler grows, backs off and skips; resume is exact"
