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
# And a rank killed with kill -9 is said once by each survivor that finds it
# gone, without a second line from the thread that finds it too.
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
# kill -9 of rank 1 of 3 (as the OOM killer does): nobody said anything, so
# the survivors say that rank 1 died, each once. The communication thread
# that found the same dead peer added "fatal (while aborting): ..." on each.
out=$WORK/kill9
mkdir -p "$out"
rc=0
env -u RINGTRAIN_FAULT_STALL_RANK -u RINGTRAIN_FAULT_STALL_PHASE -u RINGTRAIN_FAULT_STALL_STEP \
  -u RINGTRAIN_FAULT_STALL_SECONDS timeout 120 "${MPIRUN[@]}" -np 3 "$RINGTRAIN_EXE" train --data "$DATA" \
  --model "$MLP" --batch 8 --epochs 100000 --device cpu --timeout 30 --logdir "$out" --log-every 20 \
  > "$WORK/kill9.log" 2>&1 &
job=$!
for _ in $(seq 1 300); do
  [ -s "$out/metrics.jsonl" ] && break
  sleep 0.1
done
victim=""
for pid in $(pgrep -f -- "--logdir $out "); do
  tr '\0' '\n' < "/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=1" && victim=$pid
done
[ -n "$victim" ] || { cat "$WORK/kill9.log"; fail "kill9: rank 1 not found"; }
kill -9 "$victim"
wait "$job" || rc=$?
log=$WORK/kill9.log
[ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$log"; fail "kill9: exit code $rc"; }
grep -Eq "^\[rank [02]/[^]]*\] fatal: .*rank\(s\) 1 \(process $victim\) died" "$log" \
  || { cat "$log"; fail "kill9: no survivor said that rank 1 died"; }
! grep -q "while aborting" "$log" || { cat "$log"; fail "kill9: a second fatal line for the same dead peer"; }
for r in 0 2; do
  [ "$(grep -c "^\[rank $r/[^]]*\] fatal" "$log")" -le 1 ] || { cat "$log"; fail "kill9: rank $r said more than one fatal line"; }
done
! grep -qE "MPI_ABORT|sent help message|ORTE_ERROR_LOG" "$log" \
  || { cat "$log"; fail "kill9: Open MPI's abort noise after the message"; }
echo "ok: kill9: $(grep -m1 "fatal" "$log")"
echo "PASS: one message per failed job"
