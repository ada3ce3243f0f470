#!/usr/bin/env bash
# eval_class_names.sh WORK RINGTRAIN
# A CSV-converted set with class names: `eval` prints per-class accuracy under
# the file's names and writes them into --json; `predict`'s label column is
# exactly the test CSV's labels, in order.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/eval_test_lib.sh"
work=$1 exe=$2
rm -rf "$work" && mkdir -p "$work"
# label, then 8 features: the class's own features raised, plus a
# deterministic per-row ripple so that the classes overlap a little.
make_csv() {  # make_csv ROWS SALT
  awk -v rows="$1" -v salt="$2" 'BEGIN {
    for (i = 0; i < rows; i++) {
      label = (i * 7 + salt) % 3; line = label
      for (j = 0; j < 8; j++) line = line "," ((j % 3 == label) ? 1.2 : 0) + ((i * 31 + j * 17 + salt) % 13) / 13.0
      print line } }'
}
make_csv 150 1 >"$work/train.csv"
make_csv 37 2 >"$work/test.csv"
"$exe" convert csv --force --train "$work/train.csv" --test "$work/test.csv" --header no --classes 3 \
  --class-names cat,dog,bird -o "$work/c.h5"
"$exe" train --device cpu --data "$work/c.h5" --model mlp:8-16-3 --batch 10 --max-steps 20 --lr 0.1 --ckpt-dir "$work/ckpt"
"$exe" eval --device cpu --ckpt "$work/ckpt" --data "$work/c.h5" --json "$work/eval.json" | tee "$work/eval.txt"
for name in cat dog bird; do
  grep -Eq "^ +[0-2] $name +[0-9.]+$" "$work/eval.txt" || fail "per-class line for '$name' missing"
done
json_check "$work/eval.json" "
assert [p['name'] for p in j['per_class']] == ['cat', 'dog', 'bird'], j['per_class']
assert j['n'] == 37 and sum(map(sum, j['confusion'])) == 37, j
"
"$exe" predict --device cpu --ckpt "$work/ckpt" --data "$work/c.h5" -o "$work/preds.csv"
cut -d, -f1 "$work/test.csv" >"$work/labels.expected"
tail -n +2 "$work/preds.csv" | cut -d, -f4 >"$work/labels.predicted"
cmp "$work/labels.expected" "$work/labels.predicted" || fail "predict's label column differs from the CSV's labels"
echo "PASS: class names in eval and labels in predict"
