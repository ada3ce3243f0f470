#!/usr/bin/env bash
# --no-decay norm,bias: after one step from the same start (so the gradients
# are the same), the exempt tensors (BatchNorm weight and bias, every bias)
# equal a run with --weight-decay 0 bit for bit, and the others a run with
# the decay and no --no-decay; the same under --zero 1 on 3 ranks, for SGD
# and AdamW. A bad group is refused with exit 2.
source "$(dirname "$0")/lib.sh"
need_python_modules h5py numpy
model="conv2d(out=4, kernel=3, padding=1, bias=false); batch_norm; relu; max_pool2d(kernel=2); flatten; linear(out=4)"
# --sync-bn: BatchNorm normalises the same 12 samples at 1 and 3 ranks.
common=(--model "$model" --epochs 100 --max-steps 1 --global-batch 12 --seed 9 --lr 0.5 --sync-bn)
for opt in "sgd --momentum 0.9" "adamw"; do
  read -r -a o <<< "--optimizer $opt"
  name=${opt%% *}
  train 1 "$WORK/$name-wd" "${common[@]}" "${o[@]}" --weight-decay 0.2
  train 1 "$WORK/$name-wd0" "${common[@]}" "${o[@]}" --weight-decay 0
  train 1 "$WORK/$name-nd" "${common[@]}" "${o[@]}" --weight-decay 0.2 --no-decay norm,bias
  train 3 "$WORK/$name-nd-zero" "${common[@]}" "${o[@]}" --weight-decay 0.2 --no-decay norm,bias --zero 1
  grep -q -- "--no-decay norm,bias: 3 of 5 parameter tensors without weight decay" "$WORK/$name-nd/log.txt" \
    || { cat "$WORK/$name-nd/log.txt"; fail "no --no-decay start-up line"; }
  for run in nd nd-zero; do
    "$PYTHON" - "$WORK/$name-$run" "$WORK/$name-wd" "$WORK/$name-wd0" "$run" <<'PY' || fail "$name $run: --no-decay"
import glob, sys
import h5py, numpy as np
def params(d):
    with h5py.File(sorted(glob.glob(d + "/ckpt/ckpt-*.h5"))[-1], "r") as f:
        return {k: np.array(f["params"][k]) for k in f["params"]}
nd, wd, wd0 = (params(d) for d in sys.argv[1:4])
exact = sys.argv[4] == "nd"  # 3 ranks reduce in another order: float tolerance
exempt = [k for k in nd if "bias" in k or "norm" in k]
assert len(exempt) == 3, sorted(nd)
for k in nd:
    ref = wd0[k] if k in exempt else wd[k]
    if exact:
        assert np.array_equal(nd[k], ref), k
    else:
        assert np.allclose(nd[k], ref, rtol=1e-5, atol=1e-6), k
    # the decay really changed the decayed tensors
    if k not in exempt:
        assert not np.allclose(wd[k], wd0[k], rtol=1e-7, atol=0), k
PY
  done
done
rc=0
"${MPIRUN[@]}" -np 1 "$RINGTRAIN_EXE" train --data "$DATA" --device cpu "${common[@]}" --no-decay norms \
  > "$WORK/bad.log" 2>&1 || rc=$?
[ $rc -eq 2 ] || { cat "$WORK/bad.log"; fail "--no-decay norms: exit code $rc, expected 2"; }
grep -q -- "--no-decay 'norms': unknown parameter group 'norms'" "$WORK/bad.log" || { cat "$WORK/bad.log"; fail "no clear error"; }
echo "PASS: --no-decay norm,bias exempts exactly the BN and bias tensors (sgd, adamw, with and without --zero 1)"
