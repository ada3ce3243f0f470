#!/usr/bin/env bash
# `model show --json` of the language-model presets needs no data flags: the
# preset fixes the context (gpt2 its vocabulary too). gpt2 has 124,439,808
# parameters with its head tied; gpt-nano shows byte tokens by default.
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
echo "PASS: model show of the gpt presets without data flags"
