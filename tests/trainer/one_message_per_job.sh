#!/usr/bin/env bash
# One clear message per failed job. Rank 1 stalls in step 2; rank 0 times out
# waiting for it and ends the job with its fatal error. mpirun then sends
# SIGTERM to rank 1: that is the job being torn down, not a clean stop, so
# rank 1 must not say "SIGTERM received: stopping after the current step", nor
# a fatal error of its own. Under bare mpirun and under launch/ringtrain-mpirun.
# Nor does Open MPI add its MPI_ABORT box after the message, or the
# "ORTE_ERROR_LOG: Data unpack would read past end of buffer in file
# util/show_help.c" line that mpirun printed in its place about one abort in
# five: the aborting rank silences the box (orte_execute_quiet).
source "$(dirname "$0")/lib.sh"
export RINGTRAIN_FAULT_STALL_RANK=1 RINGTRAIN_FAULT_STALL_PHASE=forward RINGTRAIN_FAULT_STALL_STEP=2 \
  RINGTRAIN_FAULT_STALL_SECONDS=300
fwd=(-x RINGTRAIN_FAULT_STALL_RANK -x RINGTRAIN_FAULT_STALL_PHASE -x RINGTRAIN_FAULT_STALL_STEP
  -x RINGTRAIN_FAULT_STALL_SECONDS)
run=(train --data "$DATA" --model "$MLP" --batch 8 --max-steps 4 --device cpu --timeout 3)
wrapper=$(cd "$(dirname "$0")/../../launch" && pwd)/ringtrain-mpirun

check_one_message() {  # NAME: the log of a job that rank 0's timeout ended
  local log=$WORK/$1.log
  grep -Eq "fatal: .*timed out after 3 s: rank\(s\) 1 did not arrive" "$log" \
    || { cat "$log"; fail "$1: no timeout naming rank 1"; }
  [ "$(grep -c "fatal" "$log")" -eq 1 ] || { cat "$log"; fail "$1: more than one fatal message"; }
  ! grep -q "SIGTERM received\|stopping after the current step" "$log" \
    || { cat "$log"; fail "$1: a torn-down rank announces a clean stop"; }
  ! grep -qE "MPI_ABORT|sent help message|ORTE_ERROR_LOG" "$log" \
    || { cat "$log"; fail "$1: Open MPI's abort noise after the message"; }
  ! grep -q "stop requested" "$log" || { cat "$log"; fail "$1: a torn-down rank announces a stop"; }
  echo "ok: $1: $(grep -m1 "fatal" "$log")"
}

rc=0
timeout -k 5 120 "${MPIRUN[@]}" "${fwd[@]}" -np 2 "$RINGTRAIN_EXE" "${run[@]}" > "$WORK/mpirun.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat "$WORK/mpirun.log"; fail "mpirun: exit code $rc"; }
check_one_message mpirun

rc=0
timeout -k 5 120 "$wrapper" --oversubscribe -n 2 -- "$RINGTRAIN_EXE" "${run[@]}" > "$WORK/wrapper.log" 2>&1 || rc=$?
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] || { cat "$WORK/wrapper.log"; fail "ringtrain-mpirun: exit code $rc"; }
check_one_message wrapper
echo "PASS: one message per failed job"
