#!/usr/bin/env bash
# model show --precision: the plan of each precision reports itself in --json
# (precision, every node's stored dtype, the activation and workspace bytes
# per sample) and in the text; a value outside fp32|bf16|fp16 is refused (exit 2).
# Under bf16/fp16 every node's output is stored in 16 bits, the logits too,
# and the activation bytes (outputs and gradients) halve, resnet20's and
# resnet50's, to within the fp32 sums at the branch points (0.51). The
# workspace (the largest layer's scratch) is reported apart. Fused BatchNorm +
# (add +) ReLU (--fuse, the default) shrinks the activations further.
set -euo pipefail
exe=${1:?usage: model_show_precision.sh RINGTRAIN_EXE}
python=${RINGTRAIN_PYTHON:-/usr/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/ringtrain-show-precision.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
# The storage alone (--fuse off), then fused.
for p in fp32 bf16 fp16; do
  "$exe" model show --model resnet20 --input 3,32,32 --classes 10 --precision $p --fuse off --json \
    > "$work/$p.json" || fail "model show --precision $p"
  "$exe" model show --model resnet20 --input 3,32,32 --classes 10 --precision $p --json \
    > "$work/$p-fused.json" || fail "model show --precision $p (fused)"
done
for p in fp32 bf16; do
  "$exe" model show --model resnet50 --input 3,224,224 --classes 1000 --precision $p --fuse off \
    --json > "$work/resnet50-$p.json" || fail "model show resnet50 --precision $p"
done
"$python" - "$work" <<'PY' || fail "the plans' dtypes or bytes"
import json, sys
plans = {p: json.load(open(f"{sys.argv[1]}/{p}.json")) for p in ("fp32", "bf16", "fp16")}
for p, plan in plans.items():
    assert plan["precision"] == p, (p, plan["precision"])
    stored = {"fp32": "f32", "bf16": "bf16", "fp16": "f16"}[p]
    layers = plan["layers"]
    dtypes = {layer["dtype"] for layer in layers}
    assert dtypes == {stored}, (p, dtypes)
    assert plan["workspace_bytes_per_sample"] >= 0, plan
    if p != "fp32":
        ratio = plan["activation_bytes_per_sample"] / plans["fp32"]["activation_bytes_per_sample"]
        assert 0.49 <= ratio <= 0.52, (p, ratio)
    fused = json.load(open(f"{sys.argv[1]}/{p}-fused.json"))
    assert fused["fuse"] == "on" and plan["fuse"] == "off", (fused["fuse"], plan["fuse"])
    assert fused["activation_bytes_per_sample"] < plan["activation_bytes_per_sample"], p
big = {p: json.load(open(f"{sys.argv[1]}/resnet50-{p}.json")) for p in ("fp32", "bf16")}
ratio = big["bf16"]["activation_bytes_per_sample"] / big["fp32"]["activation_bytes_per_sample"]
assert 0.49 <= ratio <= 0.52, ("resnet50", ratio)
print("per-node dtypes: the storage dtype, the logits too; activation bytes",
      {p: plan["activation_bytes_per_sample"] for p, plan in plans.items()},
      "resnet50 bf16/fp32", round(ratio, 3))
PY
"$exe" model show --model cnn --precision bf16 | grep -q "per sample (--precision bf16)" \
  || fail "the text does not name the precision"
rc=0
"$exe" model show --model cnn --precision fp8 > "$work/bad.txt" 2>&1 || rc=$?
[ $rc -eq 2 ] || { cat "$work/bad.txt"; fail "--precision fp8: exit $rc, expected 2"; }
grep -q "precision" "$work/bad.txt" || { cat "$work/bad.txt"; fail "--precision fp8: the message does not name the flag"; }
echo "PASS: model show --precision"
