#!/usr/bin/env bash
# Straggler attribution (--straggler-every): a rank with a delay in its data
# loading is named data-bound, one with a delay in compute compute-bound, and
# none is named when all are equal; metrics.jsonl has the per-rank times.
source "$(dirname "$0")/lib.sh"
# shellcheck disable=SC2034 # read by train() in lib.sh
TRAIN_LOG_FLAGS=(--log-every 10 --check-every 0)
export RINGTRAIN_FAULT_STALL_SECONDS=0.03
MPIRUN+=(-x RINGTRAIN_FAULT_STALL_RANK -x RINGTRAIN_FAULT_STALL_PHASE -x RINGTRAIN_FAULT_STALL_SECONDS)
run() {  # NAME NP: 30 steps, a report every 10
  train "$2" "$WORK/$1" --model "$MLP" --batch 8 --epochs 100 --max-steps 30 --straggler-every 10
}
# reports NAME: the slowest rank of each report in metrics.jsonl, and whether it was named
reports() {
  "$PYTHON" - "$WORK/$1/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
reps = [r for r in rows if r["kind"] == "stragglers"]
assert [r["step"] for r in reps] == [10, 20, 30], reps
for r in reps:
    assert all(t > 0 for t in r["step_s"]) and r["slowest_rank"] < len(r["step_s"]), r
print(" ".join(f'{r["slowest_rank"]}:{"named" if r["finding"] else "-"}' for r in reps))
PY
}
export RINGTRAIN_FAULT_STALL_RANK=1 RINGTRAIN_FAULT_STALL_PHASE=data
run data 3
grep -Eq "rank 1 is data-bound: data wait [0-9.]+ ms vs median [0-9.]+ ms" "$WORK/data/log.txt" \
  || { cat "$WORK/data/log.txt"; fail "data: rank 1 not named data-bound"; }
[ "$(reports data)" = "1:named 1:named 1:named" ] || fail "data: metrics say $(reports data)"
echo "ok: data: $(grep -m1 -Eo "rank 1 is data-bound.*" "$WORK/data/log.txt")"

export RINGTRAIN_FAULT_STALL_RANK=2 RINGTRAIN_FAULT_STALL_PHASE=forward
run compute 3
grep -Eq "rank 2 is compute-bound: forward [0-9.]+ ms vs median [0-9.]+ ms" "$WORK/compute/log.txt" \
  || { cat "$WORK/compute/log.txt"; fail "compute: rank 2 not named compute-bound"; }
[ "$(reports compute)" = "2:named 2:named 2:named" ] || fail "compute: metrics say $(reports compute)"
echo "ok: compute: $(grep -m1 -Eo "rank 2 is compute-bound.*" "$WORK/compute/log.txt")"

unset RINGTRAIN_FAULT_STALL_RANK RINGTRAIN_FAULT_STALL_PHASE
run none 2
if grep -Eq "is (data|compute|communication)-bound" "$WORK/none/log.txt"; then
  cat "$WORK/none/log.txt"; fail "none: a rank was named although all are equal"
fi
reports none | grep -Eq "^[01]:- [01]:- [01]:-$" || fail "none: metrics say $(reports none)"
echo "PASS: stragglers are named with their phase, and only they"
