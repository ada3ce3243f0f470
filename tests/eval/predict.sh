#!/usr/bin/env bash
# predict.sh FIXTURE WORK RINGTRAIN
# `ringtrain predict` on the fixture's test split (N = 203): one row per
# sample with index 0..N-1, a valid class, its probability in [1/classes, 1],
# and labels and predictions that tabulate to exactly `eval`'s confusion matrix.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/eval_test_lib.sh"
fixture=$1 work=$2 exe=$3
rm -rf "$work" && mkdir -p "$work"
ck=$fixture/run/ckpt/ckpt-20.h5
"$exe" predict --device cpu --ckpt "$ck" --data "$fixture/d.h5" --split test --batch 32 -o "$work/preds.csv"
"$exe" eval --device cpu --ckpt "$ck" --data "$fixture/d.h5" --json "$work/eval.json" >/dev/null
head -3 "$work/preds.csv"
"$PYTHON" - "$work/preds.csv" "$work/eval.json" <<'PY' || fail "predictions"
import csv, json, sys
rows = list(csv.reader(open(sys.argv[1])))
ev = json.load(open(sys.argv[2]))
assert rows[0] == ["index", "predicted", "probability", "label"], rows[0]
rows = rows[1:]
assert len(rows) == ev["n"] == 203, len(rows)
confusion = [[0] * 4 for _ in range(4)]
for i, (index, pred, prob, label) in enumerate(rows):
    assert int(index) == i, (i, index)
    assert 0 <= int(pred) < 4, pred
    assert 0.25 <= float(prob) <= 1.0, prob
    confusion[int(label)][int(pred)] += 1
assert confusion == ev["confusion"], (confusion, ev["confusion"])
print("PASS:", len(rows), "predictions agree with eval's confusion matrix")
PY
