#!/usr/bin/env bash
# Issue 17's faults with the NCCL backend: 2 nodes x 1 rank of launch/netns-cluster
# on one GPU (NCCL refuses two ranks of one host on one GPU, so the ranks must
# look like two hosts).
#   nan       a NaN in rank 1's gradients at step 3: the on-device decision stops
#             the run naming step 3, rank 1 and fc1.weight; no checkpoint after step 2
#   stall     rank 1 stalls in backward at step 3: the watchdog ends the job within
#             --timeout + 10 s with a verdict naming rank 1 on node1 in 'backward',
#             and the NCCL all-reduce records in rank 0's flight file
#   kill9     SIGKILL to rank 1 mid-training: the job ends within 60 s and the
#             verdict names rank 1 on node1
# Skipped (77) without an NVIDIA device or where no cluster can be made.
[ -e /dev/nvidiactl ] || { echo "SKIPPED: no NVIDIA device"; exit 77; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=$root/launch/netns-cluster
reason=$("$cluster" --check 2>&1) || { rc=$?; [ $rc -eq 77 ] && { echo "SKIPPED: $reason"; exit 77; }; echo "FAIL: $reason"; exit 1; }
# shellcheck source=tests/trainer/lib.sh
source "$root/tests/trainer/lib.sh"
netns=("$cluster" --nodes 2 --ranks-per-node 1)
common=(--data "$DATA" --model "$MLP" --device cuda --backend nccl --lr 0.05 --momentum 0.9 --seed 11 --batch 8
        --epochs 100000 --log-every 1)

# ends_within PID SECONDS: rc is PID's exit status; fails if it runs longer.
ends_within() {
  timeout "$2" tail --pid="$1" -f /dev/null || { kill -9 "$1"; fail "the job did not end within $2 s"; }
  rc=0
  wait "$1" || rc=$?
}
verdict_of() { grep -m1 "flight verdict: " "$1/log.txt" || { cat "$1/log.txt"; fail "$2: no verdict"; }; }

case ${1:-} in
  nan)
    out=$WORK/nan; mkdir -p "$out"
    env RINGTRAIN_FAULT_NAN_RANK=1 RINGTRAIN_FAULT_NAN_STEP=3 RINGTRAIN_FAULT_NAN_COUNT=1 \
      "${netns[@]}" -- "$RINGTRAIN_EXE" train "${common[@]}" \
      --max-steps 8 --ckpt-dir "$out/ckpt" --ckpt-every 2 --timeout 60 >"$out/log.txt" 2>&1 &
    job=$!
    ends_within $job 120
    [ $rc -ne 0 ] || { cat "$out/log.txt"; fail "nan: the run did not fail"; }
    grep -Eq "non-finite gradients at step 3: the local gradients of rank 1 were non-finite; first non-finite parameter tensor: fc1\.weight" "$out/log.txt" \
      || { cat "$out/log.txt"; fail "nan: the message does not name step 3, rank 1 and fc1.weight"; }
    [ "$(newest "$out/ckpt")" = "$out/ckpt/ckpt-2.h5" ] || { ls "$out/ckpt"; fail "nan: a checkpoint after step 2"; }
    echo "PASS: NaN on rank 1 (NCCL, 2 nodes): $(grep -m1 -o 'non-finite gradients at step 3.*' "$out/log.txt")" ;;
  stall)
    out=$WORK/stall; mkdir -p "$out"
    start=$(date +%s)
    env RINGTRAIN_FAULT_STALL_RANK=1 RINGTRAIN_FAULT_STALL_PHASE=backward RINGTRAIN_FAULT_STALL_STEP=3 \
      RINGTRAIN_FAULT_STALL_SECONDS=120 "${netns[@]}" -- \
      "$RINGTRAIN_EXE" train "${common[@]}" --logdir "$out" --timeout 5 >"$out/log.txt" 2>&1 &
    job=$!
    ends_within $job 120
    [ $rc -ne 0 ] || fail "stall: the job exited 0"
    v=$(verdict_of "$out" stall)
    echo "$v" | grep -Eq "rank 1 \(host node1, [^)]+\) has been in phase 'backward' of step 3 for [0-9]+ s; rank 0 (is|are) waiting in" \
      || { cat "$out/log.txt"; fail "stall: the verdict does not name rank 1 on node1 in backward"; }
    n=$(echo "$v" | grep -Eo "for [0-9]+ s" | head -1 | grep -Eo "[0-9]+")
    [ "$n" -le 15 ] || fail "stall: verdict after $n s, more than --timeout + 10"
    "$RINGTRAIN_EXE" doctor flight "$out/flight" >"$out/doctor.txt" 2>&1 || { cat "$out/doctor.txt"; fail "stall: doctor failed"; }
    grep -Eq "^verdict: rank 1 \(host node1, [^)]+\) has been in phase 'backward' of step 3" "$out/doctor.txt" \
      || { cat "$out/doctor.txt"; fail "stall: doctor flight does not agree"; }
    grep -q '"nccl"' "$out/flight/rank-0.json" || { head -c 3000 "$out/flight/rank-0.json"; fail "stall: no nccl record"; }
    cat "$out/doctor.txt"
    echo "PASS: rank 1 stalled in backward (NCCL, $(( $(date +%s) - start )) s): ${v#*flight verdict: }" ;;
  kill9)
    out=$WORK/kill9; mkdir -p "$out"
    start=$(date +%s)
    "${netns[@]}" -- "$RINGTRAIN_EXE" train "${common[@]}" --logdir "$out" --timeout 20 >"$out/log.txt" 2>&1 &
    job=$!
    for _ in $(seq 1 600); do [ -s "$out/metrics.jsonl" ] && break; sleep 0.1; done
    id=$(sed -n 's/^netns-cluster: cluster \(rtnc-[0-9]*\):.*/\1/p' "$out/log.txt" | head -n 1)
    victim=
    for p in $(ip netns pids "$id-n1"); do
      [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ringtrain ] && victim=$p
    done
    [ -n "$victim" ] || { cat "$out/log.txt"; fail "kill9: rank 1 not found in $id-n1"; }
    sleep 2
    kill -9 "$victim"
    ends_within $job 60
    [ $rc -ne 0 ] || fail "kill9: the job exited 0"
    grep -v "^epoch\|^ *step\|^eval" "$out/log.txt" | tail -n 20
    grep -Eq "rank 1|node1" "$out/log.txt" || fail "kill9: no message names rank 1 or node1"
    echo "PASS: SIGKILL to rank 1 (NCCL) ended the job in $(( $(date +%s) - start )) s (exit $rc)" ;;
  *) echo "usage: $0 nan|stall|kill9" >&2; exit 2 ;;
esac
