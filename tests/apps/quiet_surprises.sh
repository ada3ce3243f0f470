#!/usr/bin/env bash
# The quiet surprises of a first hour, each as a user meets it: a default that
# differs between commands, an accuracy of nothing, a warm-up that outlasts
# the run, NaN in a CSV, a negative count, a dataset nobody checked.
source "$(dirname "$0")/lib.sh"
: "${MAKE_FIXTURES:?}"
FX=$WORK/fixtures
"$MAKE_FIXTURES" "$FX" || fail "cannot make the data fixtures"

# data inspect shows the sharding train uses: the same default seed (42).
expect 0 inspect_default "seed 42" "$R" data inspect --data "$DATA" --batch 8
"$R" data inspect --data "$DATA" --batch 8 --seed 42 > "$WORK/inspect42.log" 2>&1
cmp -s "$WORK/inspect_default.log" "$WORK/inspect42.log" || fail "data inspect's default seed is not train's 42"

# An empty test split: said at start-up, no accuracy printed; eval refuses it.
expect 0 train_empty_test "warning: --eval-split test: .*empty_test.h5:/test is empty" \
  "$R" train --data "$FX/empty_test.h5" --model mlp:12-10 --batch 8 --device cpu --logdir "$WORK/empty-logs"
# The summary record says null, not 0, and n=0.
"$PYTHON" - "$WORK/empty-logs/metrics.jsonl" <<'PY' || fail "the summary record reports an accuracy of nothing"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
s = [r for r in rows if r.get("kind") == "summary"]
assert len(s) == 1, s
assert s[0]["test_accuracy"] is None and s[0]["test_loss"] is None and s[0]["test_n"] == 0, s[0]
assert not [r for r in rows if r.get("kind") == "eval"], "an eval record of an empty split"
PY
grep -q "no test accuracy (the eval split is empty or absent)" "$WORK/train_empty_test.log" || fail "no word on the missing accuracy"
! grep -qE "test accuracy [0-9]|accuracy 0.0000" "$WORK/train_empty_test.log" || fail "an accuracy of nothing was printed"
expect 0 train_for_eval "done after" "$R" train --data "$FX/empty_test.h5" --model mlp:12-10 --batch 8 --device cpu \
  --ckpt-dir "$WORK/empty-ckpt"
expect 2 eval_empty_split "--split test: .*empty_test.h5:/test is empty: there is nothing to evaluate" \
  "$R" eval --ckpt "$WORK/empty-ckpt" --data "$FX/empty_test.h5"

# predict on data nobody labelled: predictions, with the label column empty;
# eval, which needs labels, says what is missing.
expect 0 predict_unlabelled "wrote 40 predictions .*no_test_labels.h5:/test \(no labels: the label column is empty\)" \
  "$R" predict --ckpt "$WORK/empty-ckpt" --data "$FX/no_test_labels.h5" -o "$WORK/unlabelled.csv"
[ "$(head -1 "$WORK/unlabelled.csv")" = "index,predicted,probability,label" ] || fail "predict's header"
[ "$(grep -c '^[0-9]*,[0-9]*,[0-9.]*,$' "$WORK/unlabelled.csv")" -eq 40 ] \
  || { head "$WORK/unlabelled.csv"; fail "predict's rows for unlabelled data"; }
expect 2 eval_unlabelled "no_test_labels.h5: no dataset 'y' in split /test" \
  "$R" eval --ckpt "$WORK/empty-ckpt" --data "$FX/no_test_labels.h5"

# CSV labels that are class names map to classes (sorted, or in --class-names order).
printf 'dog,1,2\ncat,0.5,1\nbird,1,1\ncat,2,0.25\ndog,3,1\nbird,1,0\n' > "$WORK/named.csv"
expect 0 csv_named_labels "wrote" "$R" convert csv --train "$WORK/named.csv" --test-fraction 0.5 -o "$WORK/named.h5"
expect 0 csv_named_check "/train: 3 samples of \[2\] float32, 3 classes" "$R" data check "$WORK/named.h5"
expect 2 csv_named_unknown "named.csv:3: label 'bird' is not one of --class-names cat,dog" \
  "$R" convert csv --train "$WORK/named.csv" --test-fraction 0.5 --class-names cat,dog -o "$WORK/named2.h5"

# Data nobody labelled, from a CSV: convert asks for the classes, data check
# says "no labels", predict leaves the label column empty.
printf '1,2\n0.5,1\n1,1\n2,0.25\n3,1\n1,0\n' > "$WORK/unlabelled.csv"
expect 2 csv_unlabelled_no_classes "--label-column none: give --classes N" \
  "$R" convert csv --train "$WORK/unlabelled.csv" --label-column none --test-fraction 0.5 -o "$WORK/u.h5"
expect 0 csv_unlabelled "/test: 3 samples of 2 float32 features, 3 classes, no labels" \
  "$R" convert csv --train "$WORK/unlabelled.csv" --label-column none --classes 3 --test-fraction 0.5 -o "$WORK/u.h5"
expect 0 check_unlabelled "/test: 3 samples of \[2\] float32, 3 classes \(no labels\), no NaN or Inf" \
  "$R" data check "$WORK/u.h5"
expect 0 train_named "done after" "$R" train --data "$WORK/named.h5" --model mlp:2-3 --batch 1 --max-steps 2 \
  --device cpu --ckpt-dir "$WORK/named-ckpt"
expect 0 predict_csv_unlabelled "wrote 3 predictions .*no labels" \
  "$R" predict --ckpt "$WORK/named-ckpt" --data "$WORK/u.h5" -o "$WORK/u.csv"
[ "$(grep -c '^[0-9]*,[0-2],[0-9.]*,$' "$WORK/u.csv")" -eq 3 ] || { cat "$WORK/u.csv"; fail "predict's rows for the unlabelled CSV"; }

# A warm-up longer than the run.
expect 2 warmup_beyond_run "--warmup 500 is not shorter than the run's 3 optimizer steps" \
  "$R" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 3 --warmup 500 --device cpu
expect 2 warmup_beyond_run_np2 "--warmup 3 is not shorter than the run's 3 optimizer steps" \
  "${MPIRUN[@]}" -np 2 "$R" train --data "$DATA" --model "$MLP" --batch 8 --max-steps 3 --warmup 3 --device cpu

# Negative counts name the flag and the range.
expect 2 negative_max_steps "--max-steps: '-1' is negative: it takes a whole number >= 0" \
  "$R" train --data "$DATA" --max-steps -1
expect 2 negative_batch "--batch: '-1' is negative: it takes a whole number in \[1 - 1048576\]" \
  "$R" train --data "$DATA" --batch -1
expect 2 negative_eval_every "--eval-every: '-5' is negative" "$R" train --data "$DATA" --eval-every -5
expect 2 negative_eval_batch "--batch: '-4' is negative" "$R" eval --ckpt x --data "$DATA" --batch -4
expect 2 zero_n "--n: '0' is not allowed: it takes a whole number >= 1" "$R" convert synthetic --n 0 -o "$WORK/z.h5"

# NaN or Inf in a CSV: refused by convert, naming the row and the column.
printf '0,1.5,2\n1,nan,1\n0,1,1\n1,2,0.25\n' > "$WORK/nan.csv"
expect 2 csv_nan "nan.csv:2: column 2: 'nan' is not a finite number" \
  "$R" convert csv --train "$WORK/nan.csv" --test-fraction 0.5 -o "$WORK/nan.h5"
printf '0,1.5,2\n1,0.5,1\n0,1,-inf\n1,2,0.25\n' > "$WORK/inf.csv"
expect 2 csv_inf "inf.csv:3: column 3: '-inf' is not a finite number" \
  "$R" convert csv --train "$WORK/inf.csv" --test-fraction 0.5 -o "$WORK/inf.h5"
[ ! -e "$WORK/nan.h5" ] && [ ! -e "$WORK/inf.h5" ] || fail "a refused conversion left its output"

# data check: per split, exit 2 on a NaN, an empty split, a label out of range.
expect 0 check_good "/train: 103 samples of \[1,4,4\] uint8, 10 classes" "$R" data check "$FX/good.h5"
grep -q "/test: 17 samples" "$WORK/check_good.log" || fail "data check does not report /test"
expect 2 check_nonfinite "problem in /train: 2 value\(s\) are NaN or Inf; the first is element 5 of sample 7" \
  "$R" data check "$FX/nonfinite.h5"
# Training on that NaN: bad input (exit 2) naming the sample, not "non-finite
# gradients" (exit 3, which ringtrain-mpirun --max-restarts retries).
nan_flags=(train --data "$FX/nonfinite.h5" --eval-split train --model mlp:12-8-10 --batch 8
           --epochs 1 --device cpu)
expect 2 train_data_nan "nonfinite.h5:/train/x: sample (7|30) holds a non-finite value \((nan|inf) at element (5|0)\): the data is bad" \
  "$R" "${nan_flags[@]}"
! grep -q "non-finite gradients" "$WORK/train_data_nan.log" || fail "train_data_nan: reported as gradients"
expect 2 train_data_nan_np2 "sample (7|30) holds a non-finite value" "${MPIRUN[@]}" -np 2 "$R" "${nan_flags[@]}"
expect 2 eval_data_nan "sample (7|30) holds a non-finite value" \
  "$R" eval --data "$FX/nonfinite.h5" --split train --ckpt "$WORK/empty-ckpt" --device cpu
expect 2 check_empty "problem in /test: the split is empty" "$R" data check "$FX/empty_test.h5"
expect 2 check_labels "problem in /train: 1 label\(s\) in y are outside \[0, 10\) \(num_classes = 10\): sample 17 has 10" \
  "$R" data check "$FX/label_range.h5"
expect 2 check_missing "nothere.h5 does not exist" "$R" data check "$WORK/nothere.h5"
echo "PASS: each quiet surprise now says what it is"
