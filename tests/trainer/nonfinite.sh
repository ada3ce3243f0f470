#!/usr/bin/env bash
# NaN and Inf gradients (--nonfinite): the run stops at the bad step naming the
# step, the ranks and the first bad tensor, and writes no checkpoint from that
# state; skip:N skips the update (the state stays that of the step before) and
# counts it.
source "$(dirname "$0")/lib.sh"
common=(--data "$DATA" --batch 8 --epochs 100 --timeout 60 --device cpu --log-every 1)

# 1. A learning rate that diverges (the CNN's do; the MLP's ReLUs die first): the
# stop names the step; the checkpoints before it are all there is, and the newest
# of them is kept (--keep 1).
run_fail lr -np 2 "$RINGTRAIN_EXE" train "${common[@]}" --model "$CNN" --lr 1e6 --max-steps 40 \
  --ckpt-dir "$WORK/lr/ckpt" --ckpt-every 1 --keep 1
log=$WORK/lr/log.txt
grep -Eq "non-finite gradients at step [0-9]+: .*first non-finite parameter tensor: .*stopping \(--nonfinite stop\): no checkpoint is written from this state; the newest good checkpoint is .*ckpt-[0-9]+\.h5" "$log" \
  || { cat "$log"; fail "lr: no non-finite stop message"; }
bad=$(grep -Eom1 "non-finite gradients at step [0-9]+" "$log" | grep -Eo "[0-9]+$")
[ "$bad" -gt 1 ] || { cat "$log"; fail "lr: stopped at step $bad, expected after a good step"; }
[ "$(newest "$WORK/lr/ckpt")" = "$WORK/lr/ckpt/ckpt-$((bad - 1)).h5" ] \
  || { ls "$WORK/lr/ckpt"; fail "lr: newest checkpoint is not the one of step $((bad - 1))"; }
[ "$(ls "$WORK"/lr/ckpt/ckpt-*.h5 | wc -l)" -eq 1 ] || fail "lr: --keep 1 should leave one checkpoint"
echo "ok: lr: $(grep -m1 -Eo "non-finite gradients at step .*" "$log")"
# The kept checkpoint is good: eval accepts it.
"${MPIRUN[@]}" -np 1 "$RINGTRAIN_EXE" eval --ckpt "$(newest "$WORK/lr/ckpt")" --data "$DATA" --device cpu \
  > "$WORK/lr/eval.txt" 2>&1 || { cat "$WORK/lr/eval.txt"; fail "lr: eval of the kept checkpoint failed"; }

# 2. A NaN in one rank's gradient: that rank and the tensor are named.
export RINGTRAIN_FAULT_NAN_RANK=1 RINGTRAIN_FAULT_NAN_STEP=3
run_fail nan -np 3 -x RINGTRAIN_FAULT_NAN_RANK -x RINGTRAIN_FAULT_NAN_STEP "$RINGTRAIN_EXE" train \
  "${common[@]}" --model "$MLP" --max-steps 6 --ckpt-dir "$WORK/nan/ckpt" --ckpt-every 1
log=$WORK/nan/log.txt
grep -Eq "non-finite gradients at step 3: the local gradients of rank 1 were non-finite; first non-finite parameter tensor: fc1\.weight \(layer 1 'fc1'\)" "$log" \
  || { cat "$log"; fail "nan: the message does not name step 3, rank 1 and the first weight (fc1 after flatten)"; }
[ "$(newest "$WORK/nan/ckpt")" = "$WORK/nan/ckpt/ckpt-2.h5" ] || { ls "$WORK/nan/ckpt"; fail "nan: a checkpoint was written after step 2"; }
echo "ok: nan: $(grep -m1 -Eo "non-finite gradients at step .*" "$log")"

# 3. skip:3 with one bad step trains on; that step leaves the state of the
# step before (parameters and optimizer state), and the skip is counted.
out=$WORK/skip
export RINGTRAIN_FAULT_NAN_COUNT=1
MPIRUN+=(-x RINGTRAIN_FAULT_NAN_RANK -x RINGTRAIN_FAULT_NAN_STEP -x RINGTRAIN_FAULT_NAN_COUNT)
# shellcheck disable=SC2034 # read by train() in lib.sh
TRAIN_LOG_FLAGS=(--log-every 1 --check-every 1)
train 3 "$out" --model "$MLP" --batch 8 --epochs 100 --max-steps 6 --ckpt-every 1 \
  --nonfinite skip:3 --optimizer sgd --momentum 0.9
"$COMPARE" "$out/ckpt/ckpt-3.h5" "$out/ckpt/ckpt-2.h5" --exact --any-step \
  || fail "skip: the skipped step 3 changed the state of step 2"
"$COMPARE" "$out/ckpt/ckpt-4.h5" "$out/ckpt/ckpt-3.h5" --exact --any-step > /dev/null \
  && fail "skip: step 4 did not update the parameters"
grep -Eq "non-finite gradients at step 3: the local gradients of rank 1 were non-finite.*update skipped \(1 of at most 3 consecutive, 1 skipped in all\)" "$out/log.txt" \
  || { cat "$out/log.txt"; fail "skip: no skip message"; }
grep -Eq "step 6/6 .*skipped 1 non-finite" "$out/log.txt" || { cat "$out/log.txt"; fail "skip: the progress line does not count the skip"; }
"$PYTHON" - "$out/metrics.jsonl" <<'PY' || fail "skip: metrics.jsonl does not count the skipped step"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = {r["step"]: r for r in rows if r["kind"] == "train"}
assert [train[s]["skipped_steps"] for s in range(1, 7)] == [0, 0, 1, 1, 1, 1], train
assert all(math.isfinite(r["loss"]) for r in train.values()), train
PY
# 4. More consecutive bad steps (2, 3, 4) than skip:2 allows: the run stops at the third.
export RINGTRAIN_FAULT_NAN_RANK=0 RINGTRAIN_FAULT_NAN_STEP=2 RINGTRAIN_FAULT_NAN_COUNT=3
run_fail skip_exhausted -np 2 "$RINGTRAIN_EXE" train "${common[@]}" --model "$MLP" --max-steps 8 --nonfinite skip:2
grep -Eq "non-finite gradients at step 4: the local gradients of rank 0 were non-finite.*stopping \(3 consecutive bad steps, --nonfinite skip:2\)" "$WORK/skip_exhausted/log.txt" \
  || { cat "$WORK/skip_exhausted/log.txt"; fail "skip_exhausted: no stop after 3 bad steps"; }
# 5. A NaN loss on one rank with finite gradients: the all-reduce carries the
# flag to every rank, and the stop names the step and that rank's loss.
export RINGTRAIN_FAULT_NAN_RANK=2 RINGTRAIN_FAULT_NAN_STEP=3 RINGTRAIN_FAULT_NAN_COUNT=1 RINGTRAIN_FAULT_NAN_WHAT=loss
run_fail loss -np 3 -x RINGTRAIN_FAULT_NAN_WHAT "$RINGTRAIN_EXE" train "${common[@]}" --model "$MLP" --max-steps 6 \
  --ckpt-dir "$WORK/loss/ckpt" --ckpt-every 1
grep -Eq "non-finite loss at step 3: the local loss of rank 2 was non-finite; first non-finite parameter tensor: none \(the gradients were finite\); stopping \(--nonfinite stop\)" "$WORK/loss/log.txt" \
  || { cat "$WORK/loss/log.txt"; fail "loss: the message does not name step 3 and rank 2's loss"; }
[ "$(newest "$WORK/loss/ckpt")" = "$WORK/loss/ckpt/ckpt-2.h5" ] || { ls "$WORK/loss/ckpt"; fail "loss: a checkpoint was written after step 2"; }
echo "ok: loss: $(grep -m1 -Eo "non-finite loss at step .*" "$WORK/loss/log.txt")"
# skip:1 leaves the state of step 2 and drops step 3's loss from the window:
# the logged losses stay finite.
MPIRUN+=(-x RINGTRAIN_FAULT_NAN_WHAT)
out=$WORK/loss_skip
train 3 "$out" --model "$MLP" --batch 8 --epochs 100 --max-steps 5 --ckpt-every 1 \
  --nonfinite skip:1 --optimizer sgd --momentum 0.9
"$COMPARE" "$out/ckpt/ckpt-3.h5" "$out/ckpt/ckpt-2.h5" --exact --any-step \
  || fail "loss_skip: the skipped step 3 changed the state of step 2"
grep -Eq "non-finite loss at step 3: the local loss of rank 2 was non-finite.*update skipped \(1 of at most 1 consecutive, 1 skipped in all\)" "$out/log.txt" \
  || { cat "$out/log.txt"; fail "loss_skip: no skip message"; }
"$PYTHON" - "$out/metrics.jsonl" <<'PY' || fail "loss_skip: a logged loss is not finite or the skip is not counted"
import json, math, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = {r["step"]: r for r in rows if r["kind"] == "train"}
assert [train[s]["skipped_steps"] for s in range(1, 6)] == [0, 0, 1, 1, 1], train
assert all(math.isfinite(r["loss"]) for r in train.values()), train
PY
echo "PASS: non-finite gradients and loss stop or skip as asked"
