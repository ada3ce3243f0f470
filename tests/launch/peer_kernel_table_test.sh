#!/usr/bin/env bash
# launch/bench/peer_gpu_models.py --kernel-table on the CPU (Debian's PyTorch):
# one more window under torch.profiler, written as ncu_kernel_table.py's table
# (header, rows heaviest first with share and calls, the total row); more than
# one case with --kernel-table is refused with exit 2.
set -euo pipefail
root=${1:?usage: peer_kernel_table_test.sh SOURCE_DIR}
python=${RINGTRAIN_PYTHON:-/usr/bin/python3}
"$python" -c 'import torch' 2> /dev/null || { echo "SKIPPED: $python has no torch module"; exit 77; }
work=$(mktemp -d "${TMPDIR:-/tmp}/ringtrain-peer-table.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
peer=$root/launch/bench/peer_gpu_models.py
"$python" "$peer" --device cpu --cases vgg16@1:fp32 --steps 1 --warmup 0 --repeats 1 \
  --kernel-table "$work/table.txt" > "$work/log.txt" 2>&1 || { cat "$work/log.txt"; fail "exit $?"; }
cat "$work/table.txt"
sed -n 1p "$work/table.txt" | grep -q '^# vgg16 batch 1 fp32, 1 step(s) under torch.profiler$' || fail "title"
sed -n 2p "$work/table.txt" | grep -qE '^ +total ms +share +calls +kernel$' || fail "header"
sed -n 3p "$work/table.txt" | grep -qE '^ +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]% +[0-9]+  aten::' || fail "first row"
tail -1 "$work/table.txt" | grep -qE '^ +[0-9]+\.[0-9]{3} 100\.0% +[0-9]+  \(all [0-9]+ kernels\)$' || fail "total row"
"$python" - "$work/table.txt" <<'PY' || fail "rows not heaviest first, or shares not summing to the total"
import sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[2:-1]]
ms = [float(r[0]) for r in rows]
assert ms == sorted(ms, reverse=True), ms
PY
rc=0
"$python" "$peer" --device cpu --cases vgg16@1:fp32,resnet50@1:fp32 --kernel-table "$work/two.txt" \
  > "$work/two.log" 2>&1 || rc=$?
{ [ $rc -eq 2 ] && grep -q "takes one case" "$work/two.log"; } || fail "two cases: exit $rc"
echo "PASS: peer kernel table"
