#!/usr/bin/env bash
# Every wait has a timeout, the data set's collective open included: a rank
# that never opens the data set makes the others fail with the timeout message
# naming it, after --timeout, instead of hanging (train, data inspect, bench data).
source "$(dirname "$0")/lib.sh"
export RINGTRAIN_FAULT_STALL_RANK=1 RINGTRAIN_FAULT_STALL_PHASE=open RINGTRAIN_FAULT_STALL_SECONDS=300
fwd=(-x RINGTRAIN_FAULT_STALL_RANK -x RINGTRAIN_FAULT_STALL_PHASE -x RINGTRAIN_FAULT_STALL_SECONDS)
# NAME COMMAND...: fails, naming rank 1 and the 4 s it waited. No clock: the
# stalled rank sleeps 300 s, longer than the 90 s given here, so a run that
# waited for it instead of timing out ends in timeout's 124 or 137.
expect_timeout() {
  local name=$1 rc=0
  shift
  timeout -k 5 90 "${MPIRUN[@]}" "${fwd[@]}" -np 3 "$RINGTRAIN_EXE" "$@" > "$WORK/$name.log" 2>&1 || rc=$?
  [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat "$WORK/$name.log"; fail "$name: exit code $rc"; }
  grep -Eq "mpi allreduce #[0-9]+ timed out after 4 s: rank\(s\) 1 did not arrive" "$WORK/$name.log" \
    || { cat "$WORK/$name.log"; fail "$name: no timeout message naming rank 1"; }
  echo "ok: $name: $(grep -m1 -Eo "mpi allreduce #[0-9]+ timed out.*" "$WORK/$name.log")"
}
expect_timeout train train --data "$DATA" --model "$MLP" --batch 8 --max-steps 2 --timeout 4 --device cpu
expect_timeout inspect data inspect --data "$DATA" --batch 8 --timeout 4
expect_timeout bench_data bench data --data "$DATA" --batch 8 --steps 2 --repeat 1 --timeout 4
echo "PASS: a rank that never opens the data set ends the job after --timeout"
