#!/usr/bin/env bash
# eval_matches_trainer.sh FIXTURE WORK NP RINGTRAIN MPIRUN...
# `ringtrain eval` of every checkpoint of the fixture's 2-rank run, on NP ranks,
# gives exactly the accuracy (and sample count) the trainer logged at that
# step, and its --json object is complete and self-consistent.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/eval_test_lib.sh"
fixture=$1 work=$2 np=$3 exe=$4
shift 4
rm -rf "$work" && mkdir -p "$work"

checked=0
while read -r step accuracy n loss; do
  ck="$fixture/run/ckpt/ckpt-$step.h5"
  out="$work/eval-$step.txt"
  "$@" -np "$np" "$exe" eval --device cpu --ckpt "$ck" --data "$fixture/d.h5" --batch 16 --json "$work/eval-$step.json" </dev/null >"$out" 2>&1 ||
    { cat "$out"; fail "eval of $ck on $np rank(s)"; }
  cat "$out"
  grep -q "(step $step), split .*: n=$n " "$out" || fail "report line of step $step"
  grep -q "per-class accuracy:" "$out" || fail "no per-class accuracy"
  grep -q "confusion matrix" "$out" || fail "no confusion matrix"
  json_check "$work/eval-$step.json" "
step, acc, n, loss = $step, $accuracy, $n, $loss
for key in ('step', 'n', 'loss', 'accuracy', 'per_class', 'confusion'):
    assert key in j, f'missing {key}'
assert j['step'] == step, (j['step'], step)
assert j['n'] == n, (j['n'], n)
assert j['accuracy'] == acc, f'accuracy {j[\"accuracy\"]!r} != trainer {acc!r} at step {step}'
assert abs(j['loss'] - loss) <= 1e-5 * abs(loss), (j['loss'], loss)
c = j['confusion']
assert len(c) == 4 and all(len(row) == 4 for row in c), c
assert sum(map(sum, c)) == n, f'confusion sums to {sum(map(sum, c))}, not {n}'
assert sum(c[k][k] for k in range(4)) / n == acc, 'diagonal / n != accuracy'
pc = j['per_class']
assert [p['class'] for p in pc] == [0, 1, 2, 3], pc
for k, p in enumerate(pc):
    assert p['n'] == sum(c[k]), p
    assert p['accuracy'] == (c[k][k] / sum(c[k]) if sum(c[k]) else 0.0), p
    assert 0.0 <= p['accuracy'] <= 1.0
"
  checked=$((checked + 1))
done < <(trainer_evals "$fixture/run/metrics.jsonl")
[ "$checked" -eq 6 ] || fail "checked $checked checkpoints, expected 6"

# A directory means its newest checkpoint.
"$@" -np "$np" "$exe" eval --device cpu --ckpt "$fixture/run/ckpt" --data "$fixture/d.h5" </dev/null >"$work/dir.txt" 2>&1 ||
  { cat "$work/dir.txt"; fail "eval of the checkpoint directory"; }
grep -q "ckpt-30.h5 (step 30)" "$work/dir.txt" || { cat "$work/dir.txt"; fail "directory did not give step 30"; }
echo "PASS: $checked checkpoints on $np rank(s) match the trainer's evaluation"
