#!/usr/bin/env bash
# `model show --json` of the language-model presets needs no data flags: the
# preset fixes the context (gpt2 its vocabulary too). gpt2 has 124,439,808
# parameters with its head tied; gpt-nano shows byte tokens by default; the
# linear -> gelu_tanh pairs a GPU runs with cuBLASLt's GELU epilogue are named.
#   model_show_gpt.sh RINGTRAIN_EXE
set -euo pipefail
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python
exe=$1
check() {  # PRESET PARAMS INPUT CLASSES [flags...]
  local preset=$1 params=$2 input=$3 classes=$4 out
  shift 4
  out=$("$exe" model show --model "$preset" --json "$@") || { echo "FAIL: model show $preset exited $?"; exit 1; }
  "$PYTHON" -c 'import json,sys
j=json.loads(sys.argv[1]); want=(int(sys.argv[2]), [int(sys.argv[3])], int(sys.argv[4]))
got=(j["params"], j["input"], j["classes"])
assert got==want, "%s: got %s, want %s" % (sys.argv[5], got, want)
assert j["layers"][-1]["name"]=="lm_head" and j["layers"][-1]["params"]==0
print("ok: %s: %d parameters, input %s, %d classes" % (sys.argv[5], *got[:1], got[1], got[2]))' \
    "$out" "$params" "$input" "$classes" "$preset" || exit 1
}
check gpt2 124439808 1024 50257
check gpt-nano 842496 128 256
check gpt-nano 825984 128 127 --classes 127
# The linear -> gelu_tanh pairs a GPU's plan runs as one cuBLASLt GEMM (GELU
# epilogue): named under bf16 (the CPU plan shown keeps them apart), under
# fp32 named as not fused, and none under --fuse off.
for case in "bf16 on 4 True" "fp32 on 4 False" "bf16 off 0 False"; do
  read -r p fuse n gpu <<<"$case"
  out=$("$exe" model show --model gpt-nano --json --precision "$p" --fuse "$fuse")
  "$PYTHON" -c 'import json,sys
e=json.loads(sys.argv[1])["linear_gelu_epilogue"]; n=int(sys.argv[2])
assert len(e["gelu_nodes"])==n and str(e["on_gpu"])==sys.argv[3], e
assert e["gelu_nodes"]==["h.%d.mlp.gelu" % i for i in range(n)], e' "$out" "$n" "$gpu" ||
    { echo "FAIL: model show gpt-nano --precision $p --fuse $fuse: linear + gelu pairs"; exit 1; }
done
text=$("$exe" model show --model gpt-nano --precision bf16)
grep -q "linear + gelu_tanh: 4 pair(s) (h.0.mlp.gelu ... h.3.mlp.gelu) run as one cuBLASLt GEMM with the GELU epilogue on a GPU" <<<"$text" ||
  { echo "FAIL: model show gpt-nano --precision bf16 does not name the GELU epilogue's pairs"; exit 1; }
echo "PASS: model show of the gpt presets without data flags; the GELU epilogue's pairs named"
