#!/usr/bin/env bash
# shellcheck disable=SC2034  # MPIRUN is read by train() in tests/trainer/lib.sh
# Training across the namespace cluster (2 nodes x 2 ranks, launch/netns-cluster).
#   train_multinode.sh equivalence   20 steps on 2x2 give the parameters of 1 rank
#                                    with the same global batch (shm, ring, mpi)
#   train_multinode.sh sigterm       SIGTERM to the job mid-training: every rank
#                                    stops, a checkpoint is written, and a 2x2 run
#                                    resumes from it
#   train_multinode.sh kill9         SIGKILL to rank 3 on node1 mid-training ends
#                                    the job within 60 s, naming rank and node;
#                                    rank 2 (same node) says live it was lost
#   train_multinode.sh flight        rank 3 on node1 stalls in data, backward or
#                                    the optimizer, or is stopped (SIGSTOP): the
#                                    flight verdict and doctor flight name it
# Uses tests/trainer/lib.sh (data set, train, same). Exit 77 where this machine
# cannot host a cluster.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cluster=$root/launch/netns-cluster
reason=$("$cluster" --check 2>&1) || { rc=$?; [ $rc -eq 77 ] && { echo "SKIPPED: $reason"; exit 77; }; echo "FAIL: $reason"; exit 1; }
# shellcheck source=tests/trainer/lib.sh
source "$root/tests/trainer/lib.sh"
netns=("$cluster" --nodes 2 --ranks-per-node 2 --oversubscribe)
# train() (lib.sh) names --device cpu; the direct runs below add it themselves.
common=(--model "$MLP" --lr 0.05 --momentum 0.9 --seed 11)

# wait_for_training DIR LAUNCHER_PID: until the run's metrics.jsonl has a record.
wait_for_training() {
  for _ in $(seq 1 600); do
    [ -s "$1/metrics.jsonl" ] && return 0
    kill -0 "$2" 2>/dev/null || break
    sleep 0.1
  done
  cat "$1/log.txt"; fail "training did not start"
}
# wait_bounded PID SECONDS: sets rc to the exit code of PID (a child of this
# shell), or fails if it runs longer.
wait_bounded() {
  timeout "$2" tail --pid="$1" -f /dev/null || fail "the job did not end within $2 s"
  rc=0
  wait "$1" || rc=$?
}
# rank_pid_in NAMESPACE RANK: the pid of ringtrain rank RANK in that namespace.
rank_pid_in() {
  local p
  for p in $(ip netns pids "$1"); do
    if [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ringtrain ] &&
       tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$p"
      return
    fi
  done
}
# start_and_find_rank3 OUT TIMEOUT: starts a 2x2 run in the background (its
# pid in job), waits until it trains, and sets id (the cluster) and victim (the
# pid of rank 3, on node1).
start_and_find_rank3() {
  "${netns[@]}" -- "$RINGTRAIN_EXE" train --data "$DATA" --device cpu --batch 8 --epochs 100000 "${common[@]}" \
    --log-every 1 --logdir "$1" --timeout "$2" >"$1/log.txt" 2>&1 &
  job=$!
  wait_for_training "$1" "$job"
  id=$(sed -n 's/^netns-cluster: cluster \(rtnc-[0-9]*\):.*/\1/p' "$1/log.txt" | head -n 1)
  victim=$(rank_pid_in "$id-n1" 3)
  [ -n "$victim" ] || fail "rank 3 not found in namespace $id-n1"
}
no_leftovers() {
  local id
  id=$(sed -n 's/^netns-cluster: cluster \(rtnc-[0-9]*\):.*/\1/p' "$1" | head -n 1)
  [ -n "$id" ] || fail "no cluster id in $1"
  ! ip netns list | grep -q "^$id-" || fail "namespaces of $id left behind"
}

case ${1:-} in
  equivalence)
    MPIRUN=(mpirun --oversubscribe --bind-to none)
    train 1 "$WORK/base" --batch 16 --max-steps 20 --epochs 100 "${common[@]}" --backend shm
    MPIRUN=("${netns[@]}")
    for backend in shm ring mpi; do
      train 4 "$WORK/netns-$backend" --batch 4 --max-steps 20 --epochs 100 "${common[@]}" --backend "$backend" \
        --bucket-mb 0.0005
      grep -q "on 2 node" "$WORK/netns-$backend/log.txt" || { cat "$WORK/netns-$backend/log.txt"; fail "not 2 nodes"; }
      same "$WORK/base" "$WORK/netns-$backend" --rtol 1e-5
      no_leftovers "$WORK/netns-$backend/log.txt"
    done
    echo "PASS: 2 nodes x 2 ranks x batch 4 match 1 rank x batch 16 after 20 steps (shm, ring, mpi)" ;;
  sigterm)
    out=$WORK/run; mkdir -p "$out"
    "${netns[@]}" --term-grace 40 -- "$RINGTRAIN_EXE" train --data "$DATA" --device cpu --batch 8 --epochs 100000 "${common[@]}" \
      --ckpt-dir "$out/ckpt" --log-every 1 --logdir "$out" --timeout 60 >"$out/log.txt" 2>&1 &
    job=$!
    wait_for_training "$out" "$job"
    kill -TERM "$job"
    wait_bounded "$job" 90
    tail -n 15 "$out/log.txt"
    [ "$rc" -ne 0 ] || fail "a job stopped by SIGTERM must exit non-zero"
    [ "$(grep -c "stop requested" "$out/log.txt")" -ge 1 ] || fail "no stop message"
    no_leftovers "$out/log.txt"
    ckpt=$(ls "$out"/ckpt/ckpt-*.h5 2>/dev/null | sort -V | tail -1)
    [ -n "$ckpt" ] || fail "no checkpoint after SIGTERM"
    step=$(basename "$ckpt" .h5); step=${step#ckpt-}
    MPIRUN=("${netns[@]}")
    train 4 "$WORK/resumed" --batch 8 --epochs 100000 --max-steps $((step + 3)) "${common[@]}" --resume "$ckpt"
    grep -q "resumed from .* at step $step" "$WORK/resumed/log.txt" || fail "did not resume from the SIGTERM checkpoint"
    echo "PASS: SIGTERM to the 2x2 job left $ckpt (step $step); a 2x2 run resumed from it" ;;
  kill9)
    out=$WORK/run; mkdir -p "$out"
    start_and_find_rank3 "$out" 60
    echo "SIGKILL to rank 3 (pid $victim) in $id-n1"
    kill -9 "$victim"
    wait_bounded "$job" 60
    grep -v "^epoch\|^ *step\|^eval" "$out/log.txt" | tail -n 40
    [ "$rc" -ne 0 ] || fail "the job must fail when a rank is killed"
    # Rank 2, on the same node, sees the process gone within 100 ms and gives
    # the verdict (--timeout is 60 s); mpirun, which noticed the death too,
    # kills the job a second after its SIGTERM.
    grep -m1 "flight verdict: " "$out/log.txt" | grep -Eq "rank 3 \(host node1, cpu\) was lost \(its process [0-9]+ is gone\) in phase" ||
      fail "no live verdict saying rank 3 on node1 was lost"
    "$RINGTRAIN_EXE" doctor flight "$out/flight" >"$out/doctor.txt" 2>&1 || { cat "$out/doctor.txt"; fail "doctor flight failed"; }
    grep -Eq "^verdict: rank 3 \(host node1, cpu\) was lost" "$out/doctor.txt" || { cat "$out/doctor.txt"; fail "doctor flight does not agree"; }
    no_leftovers "$out/log.txt"
    echo "PASS: SIGKILL to rank 3 on node1 mid-training ended the job (exit $rc)" ;;
  flight)
    # Rank 3 (node1) stalls at step 3 in its data loader, in backward, in the
    # optimizer, or is stopped with SIGSTOP: within --timeout + 10 s the job
    # ends with a verdict naming rank 3 on node1 and its phase, and doctor
    # flight on the records agrees.
    for what in data backward optimizer sigstop; do
      out=$WORK/$what; mkdir -p "$out"
      start=$(date +%s)
      if [ "$what" = sigstop ]; then
        start_and_find_rank3 "$out" 5
        kill -STOP "$victim"
        # A rank of node1 sees the process stopped; one of node0 cannot look at
        # node1's processes and sees its records fall silent.
        expect="rank 3 \(host node1, cpu\) (is stopped \(SIGSTOP, process $victim\) in phase '[a-z -]+' of step [0-9]+, for [0-9]+ s|has been silent for [0-9]+ s \(stopped or lost\); it was last in phase)"
        doctor_expect="rank 3 \(host node1, cpu\) (is stopped \(SIGSTOP, process $victim\)|has been in phase|has been silent)"
      else
        RINGTRAIN_FAULT_STALL_RANK=3 RINGTRAIN_FAULT_STALL_PHASE=$what RINGTRAIN_FAULT_STALL_STEP=3 \
        RINGTRAIN_FAULT_STALL_SECONDS=120 "${netns[@]}" -- "$RINGTRAIN_EXE" train --data "$DATA" --device cpu \
          --batch 8 --epochs 100000 "${common[@]}" --log-every 1 --logdir "$out" --timeout 5 >"$out/log.txt" 2>&1 &
        job=$!
        expect="rank 3 \(host node1, cpu\) has been in phase '$what' of step 3 for [0-9]+ s; ranks 0-2 are waiting in"
        doctor_expect="rank 3 \(host node1, cpu\) has been in phase '$what' of step 3"
      fi
      wait_bounded "$job" 120
      job_rc=$rc
      # doctor reads the records as the job left them: a stopped rank let go
      # first may handle its pending SIGTERM and write a newer record (under
      # load it then looked alive, and its waiting neighbour took the blame)
      doctor_rc=0
      "$RINGTRAIN_EXE" doctor flight "$out/flight" >"$out/doctor.txt" 2>&1 || doctor_rc=$?
      [ "$what" != sigstop ] || kill -CONT "$victim" 2>/dev/null || true  # may be gone already
      [ "$job_rc" -ne 0 ] || fail "$what: a stalled job must fail"
      verdict=$(grep -m1 "flight verdict: " "$out/log.txt") || { cat "$out/log.txt"; fail "$what: no verdict"; }
      echo "$verdict" | grep -Eq "$expect" || { cat "$out/log.txt"; fail "$what: the verdict does not name rank 3 on node1 ($expect)"; }
      n=$(echo "$verdict" | grep -Eo "for [0-9]+ s" | head -1 | grep -Eo "[0-9]+")
      [ "$n" -le 15 ] || fail "$what: verdict after $n s, more than --timeout + 10"
      [ "$doctor_rc" -eq 0 ] || { cat "$out/doctor.txt"; fail "$what: doctor flight failed"; }
      grep -Eq "^verdict: ($doctor_expect)" "$out/doctor.txt" || { cat "$out/doctor.txt"; fail "$what: doctor flight does not agree"; }
      no_leftovers "$out/log.txt"
      echo "ok: $what ($(( $(date +%s) - start )) s): ${verdict#*flight verdict: }"
    done
    echo "PASS: rank 3 on node1 stalled in data, backward, optimizer, or stopped: verdicts and doctor name it" ;;
  *) echo "usage: $0 equivalence|sigterm|kill9|flight" >&2; exit 2 ;;
esac
