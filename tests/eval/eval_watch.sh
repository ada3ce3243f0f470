#!/usr/bin/env bash
# eval_watch.sh FIXTURE WORK NP RINGTRAIN MPIRUN...
# `ringtrain eval --watch` on NP ranks against a directory that does not exist
# yet and where checkpoints then arrive one by one, as the trainer writes them
# (a temporary name, then a rename). One is corrupt, one is for a model that
# does not fit the data, and a stale temporary is never renamed. The watcher
# must evaluate each good checkpoint exactly once and in step order, report
# the bad ones and go on, and stop on --until-step; restarted on the same
# logdir it must not repeat earlier results, and it must stop at the run's
# finished checkpoint; restarted once more it has nothing to do.
# shellcheck source-path=SCRIPTDIR
source "$(dirname "$0")/eval_test_lib.sh"
fixture=$1 work=$2 np=$3 exe=$4
shift 4
rm -rf "$work" && mkdir -p "$work"
src=$fixture/run/ckpt watch=$work/ckpt logdir=$work/logs

# place SOURCE STEP: copy under a temporary name, then rename into place.
place() {
  mkdir -p "$watch"
  cp "$1" "$watch/ckpt-$2.h5.tmp-$$"
  sleep 0.3  # a slow writer: the watcher polls meanwhile and must ignore it
  mv "$watch/ckpt-$2.h5.tmp-$$" "$watch/ckpt-$2.h5"
}

watcher() {  # watcher LOG [FLAGS...]: starts the watcher in the background
  local log=$1
  shift
  "${mpirun[@]}" -np "$np" "$exe" eval --device cpu --watch "$watch" --data "$fixture/d.h5" --interval 0.2 --logdir "$logdir" \
    "$@" </dev/null >"$log" 2>&1 &
  pid=$!
}
mpirun=("$@")

# ---- 1: until step 20, with a corrupt checkpoint at step 10 ----------------
watcher "$work/watch1.log" --until-step 20
wait_for_line "$work/watch1.log" "does not exist yet" 60
place "$src/ckpt-5.h5" 5
wait_for_line "$work/watch1.log" "step 5: accuracy" 60
head -c 2000 "$src/ckpt-15.h5" >"$work/stale" && mkdir -p "$watch" && mv "$work/stale" "$watch/ckpt-12.h5.tmp-4242"
place "$fixture/truncated.h5" 10
wait_for_line "$work/watch1.log" "skipping checkpoint .*ckpt-10.h5" 60
place "$src/ckpt-15.h5" 15
wait_for_line "$work/watch1.log" "step 15: accuracy" 60
place "$fixture/other_model.h5" 17
wait_for_line "$work/watch1.log" "skipping checkpoint .*ckpt-17.h5" 60
place "$src/ckpt-20.h5" 20
place "$src/ckpt-25.h5" 25
wait_for_exit "$pid" 60
cat "$work/watch1.log"
[ "$rc" -eq 0 ] || fail "watcher exited $rc"
grep -Eq "skipping checkpoint .*ckpt-10.h5 \(step 10\)" "$work/watch1.log" || fail "corrupt checkpoint not reported"
grep -Eq "skipping checkpoint .*ckpt-17.h5 \(step 17\): checkpoint .*ckpt-17.h5 does not fit this data" \
  "$work/watch1.log" || fail "incompatible checkpoint not reported"
grep -q "reached step 20 (--until-step 20)" "$work/watch1.log" || fail "no --until-step message"
if grep -q "ckpt-12" "$work/watch1.log"; then fail "the watcher looked at a temporary file"; fi
steps=$(record_steps "$logdir/eval/metrics.jsonl")
[ "$steps" = "5 15 20" ] || fail "evaluated steps '$steps', expected '5 15 20'"
ls "$logdir"/eval/events.out.tfevents.* >/dev/null || fail "no TensorBoard events file in $logdir/eval"

# ---- 2: restarted on the same logdir, stops at the finished checkpoint ------
watcher "$work/watch2.log"
wait_for_line "$work/watch2.log" "step 25: accuracy" 60
place "$src/ckpt-30.h5" 30
wait_for_exit "$pid" 60
cat "$work/watch2.log"
[ "$rc" -eq 0 ] || fail "watcher exited $rc"
grep -q "marked step 30 as its final checkpoint" "$work/watch2.log" || fail "did not stop at the finished checkpoint"
grep -Eq "skipping .*ckpt-10.h5: older than step 20" "$work/watch2.log" || fail "step 10 not skipped on restart"
steps=$(record_steps "$logdir/eval/metrics.jsonl")
[ "$steps" = "5 15 20 25 30" ] || fail "evaluated steps '$steps', expected '5 15 20 25 30'"

# Every result equals the trainer's own evaluation at that step.
"$PYTHON" - "$logdir/eval/metrics.jsonl" "$fixture/run/metrics.jsonl" <<'PY' || fail "results differ from the trainer's"
import json, sys
watched = [json.loads(l) for l in open(sys.argv[1])]
trainer = {r["step"]: r for r in map(json.loads, open(sys.argv[2])) if r.get("kind") == "eval"}
for r in watched:
    t = trainer[r["step"]]
    assert r["kind"] == "eval" and r["split"] == "test", r
    assert r["accuracy"] == t["accuracy"] and r["n"] == t["n"] == 203, (r, t)
    assert sum(map(sum, r["confusion"])) == r["n"], r
    assert r["finished"] == (r["step"] == 30), r
print("all", len(watched), "results match the trainer's evaluation")
PY

# ---- 3: restarted after the final checkpoint was evaluated: nothing to do ---
watcher "$work/watch3.log"
wait_for_exit "$pid" 60
cat "$work/watch3.log"
[ "$rc" -eq 0 ] || fail "watcher exited $rc"
grep -q "final checkpoint (step 30) was already evaluated" "$work/watch3.log" || fail "third watcher did not stop at once"
[ "$(record_steps "$logdir/eval/metrics.jsonl")" = "5 15 20 25 30" ] || fail "third watcher changed the results"
echo "PASS: watcher on $np rank(s)"
