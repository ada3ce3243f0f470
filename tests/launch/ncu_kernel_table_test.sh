#!/usr/bin/env bash
# launch/ncu_kernel_table.py on the shape of ncu's raw CSV page (header, units
# row, one row per launch; ncu's and the program's own lines around it): times
# summed per kernel in the unit the units row names, heaviest first, with the
# launch counts and the total; --skip-launches drops the first launches.
set -euo pipefail
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python
root=${1:?usage: ncu_kernel_table_test.sh SOURCE_DIR}
tool=$root/launch/ncu_kernel_table.py
work=$(mktemp -d "${TMPDIR:-/tmp}/ringtrain-ncu.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > "$work/raw.log" <<'LOG'
bench step: model resnet50 ...
==PROF== Connected to process 123 (/x/ringtrain)
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","gpu__time_duration.sum"
"","","","","","","","usecond"
"0","123","ringtrain","127.0.0.1","conv_fwd(int, float)","1","7","1,500.00"
"1","123","ringtrain","127.0.0.1","bn_apply","1","7","250.00"
"2","123","ringtrain","127.0.0.1","conv_fwd(int, float)","1","7","1,500.00"
"3","123","ringtrain","127.0.0.1","relu","1","7","n/a"
"4","123","ringtrain","127.0.0.1","bn_apply","1","7","250.00"
{"samples_per_s": 1.0}
==PROF== Disconnected from process 123
LOG
"$PYTHON" "$tool" "$work/raw.log" > "$work/out.txt" || fail "exit $?"
cat "$work/out.txt"
sed -n 2p "$work/out.txt" | grep -qE '^ +3\.000 +85\.7% +2  conv_fwd\(int, float\)$' || fail "heaviest row"
sed -n 3p "$work/out.txt" | grep -qE '^ +0\.500 +14\.3% +2  bn_apply$' || fail "second row"
tail -1 "$work/out.txt" | grep -qE '^ +3\.500 100\.0% +4  \(all 2 kernels\)$' || fail "total row"
"$PYTHON" "$tool" "$work/raw.log" --skip-launches 2 | tail -1 | grep -qE '^ +1\.750 100\.0% +2  \(all 2 kernels\)$' \
  || fail "--skip-launches 2"
sed 's/usecond/nsecond/' "$work/raw.log" > "$work/ns.log"
"$PYTHON" "$tool" "$work/ns.log" | tail -1 | grep -qE '^ +0\.00[34] ' || fail "nanoseconds: $("$PYTHON" "$tool" "$work/ns.log" | tail -1)"
echo 'no csv here' > "$work/none.log"
if "$PYTHON" "$tool" "$work/none.log" 2> "$work/err.txt"; then fail "a file without ncu's CSV was accepted"; fi
grep -q 'no ncu raw CSV header' "$work/err.txt" || fail "error: $(cat "$work/err.txt")"
echo "PASS: kernel times summed per kernel"
