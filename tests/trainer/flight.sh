#!/usr/bin/env bash
# The flight recorder and its verdict: one rank is stalled (in the data loader,
# in backward, in the optimizer), stopped (SIGSTOP) or killed (kill -9); the
# job ends within --timeout + 10 s with one verdict line naming that rank and
# its phase, and `ringtrain doctor flight` on the files left agrees.
source "$(dirname "$0")/lib.sh"
TIMEOUT=5
flags=(--data "$DATA" --model "$MLP" --batch 8 --epochs 100000 --max-steps 100000 --timeout "$TIMEOUT"
       --device cpu --log-every 1 --check-every 0)
fwd=(-x RINGTRAIN_FAULT_STALL_RANK -x RINGTRAIN_FAULT_STALL_PHASE -x RINGTRAIN_FAULT_STALL_STEP
     -x RINGTRAIN_FAULT_STALL_SECONDS)

# launch NAME: starts a 3-rank run in the background (pid in $job), logging to $WORK/NAME
launch() {
  mkdir -p "$WORK/$1"
  "${MPIRUN[@]}" "${fwd[@]}" -np 3 "$RINGTRAIN_EXE" train "${flags[@]}" --logdir "$WORK/$1" \
    > "$WORK/$1/log.txt" 2>&1 &
  job=$!
}
# finish NAME RANK PHASE_REGEX: the job fails within the limit; its verdict and the doctor's name RANK in PHASE.
finish() {
  local name=$1 rank=$2 phase=$3 rc=0 waited=0
  while kill -0 "$job" 2>/dev/null && [ $waited -lt 90 ]; do sleep 1; waited=$((waited + 1)); done
  kill -0 "$job" 2>/dev/null && { kill -9 "$job"; cat "$WORK/$name/log.txt"; fail "$name: still running after 90 s"; }
  wait "$job" || rc=$?
  local log=$WORK/$name/log.txt
  [ $rc -ne 0 ] || { cat "$log"; fail "$name: the job exited 0"; }
  local verdict
  if verdict=$(grep -m1 "flight verdict: " "$log"); then
    echo "$verdict" | grep -Eq "flight verdict: rank $rank \(host [^,]+, cpu\) [^;]*phase '$phase' of step [0-9]+" \
      || { cat "$log"; fail "$name: the verdict does not name rank $rank in phase $phase"; }
    echo "ok: $name: ${verdict#*flight verdict: }"
  else
    cat "$log"; fail "$name: no verdict line"
  fi
  "$RINGTRAIN_EXE" doctor flight "$WORK/$name/flight" > "$WORK/$name/doctor.txt" 2>&1 \
    || { cat "$WORK/$name/doctor.txt"; fail "$name: doctor flight failed"; }
  grep -Eq "^verdict: rank $rank \(host [^,]+, cpu\) [^;]*phase '$phase' of step [0-9]+" "$WORK/$name/doctor.txt" \
    || { cat "$WORK/$name/doctor.txt"; fail "$name: doctor flight does not agree"; }
  grep -Eq "^ +$rank +[^ ]+ +[0-9]+ +$phase " "$WORK/$name/doctor.txt" \
    || { cat "$WORK/$name/doctor.txt"; fail "$name: no table row for rank $rank"; }
}
# The verdict comes within --timeout + 10 s of the stall: its "for N s" says how long the rank was stuck.
check_delay() {
  local n
  n=$(grep -m1 "flight verdict: " "$WORK/$1/log.txt" | grep -Eo "for [0-9]+ s" | head -1 | grep -Eo "[0-9]+")
  [ -n "$n" ] && [ "$n" -le $((TIMEOUT + 10)) ] || fail "$1: verdict after ${n:-?} s, limit $((TIMEOUT + 10)) s"
}

export RINGTRAIN_FAULT_STALL_SECONDS=120 RINGTRAIN_FAULT_STALL_STEP=3
for case in "data 2" "backward 1" "optimizer 0"; do
  read -r phase rank <<< "$case"
  export RINGTRAIN_FAULT_STALL_PHASE=$phase RINGTRAIN_FAULT_STALL_RANK=$rank
  launch "stall_$phase"
  finish "stall_$phase" "$rank" "$phase"
  check_delay "stall_$phase"
done
unset RINGTRAIN_FAULT_STALL_PHASE RINGTRAIN_FAULT_STALL_RANK

# rank_pid NAME RANK: the pid in RANK's flight record, once it is past step 3.
rank_pid() {
  local f=$WORK/$1/flight/rank-$2.json waited=0
  while [ $waited -lt 300 ]; do
    if [ -f "$f" ] && "$PYTHON" -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if s["step"] >= 3 else 1)' "$f" 2>/dev/null; then
      "$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$f"
      return
    fi
    sleep 0.2; waited=$((waited + 1))
  done
  fail "$1: rank $2 never reached step 3"
}

# SIGSTOP: the stopped rank cannot answer; its last snapshot and /proc tell.
launch sigstop
pid=$(rank_pid sigstop 1)
kill -STOP "$pid"
finish sigstop 1 "[a-z -]+"
grep -m1 "flight verdict: " "$WORK/sigstop/log.txt" | grep -q "rank 1 (host [^,]*, cpu) is stopped (SIGSTOP" \
  || { cat "$WORK/sigstop/log.txt"; fail "sigstop: the verdict does not say rank 1 is stopped"; }

# kill -9 of a rank stalled in the data loader: its process is gone; the
# records it left still say where it was.
export RINGTRAIN_FAULT_STALL_PHASE=data RINGTRAIN_FAULT_STALL_RANK=1 RINGTRAIN_FAULT_STALL_STEP=4
launch kill9
pid=$(rank_pid kill9 1)
# Killed once its record says it is in the data loader at step 4 (the stall).
waited=0
until "$PYTHON" -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if s["step"] == 4 and s["phase"] == "data" else 1)' \
    "$WORK/kill9/flight/rank-1.json" 2>/dev/null; do
  [ $waited -lt 300 ] || fail "kill9: rank 1 never stalled in data at step 4"
  sleep 0.1; waited=$((waited + 1))
done
kill -9 "$pid"
# The waiting ranks see the process is gone within 100 ms (not at --timeout),
# before mpirun kills them, and say so live.
finish kill9 1 data
grep -m1 "flight verdict: " "$WORK/kill9/log.txt" | grep -q "rank 1 (host [^,]*, cpu) was lost (its process [0-9]* is gone)" \
  || { cat "$WORK/kill9/log.txt"; fail "kill9: the verdict does not say rank 1 was lost"; }
grep -q "fatal: shm allreduce #[0-9]*: rank(s) 1 (process [0-9]*) died" "$WORK/kill9/log.txt" \
  || { cat "$WORK/kill9/log.txt"; fail "kill9: no rank said at once that rank 1 died"; }
echo "ok: kill9 doctor: $(grep -m1 "^verdict: " "$WORK/kill9/doctor.txt")"
echo "PASS: every verdict names the stuck rank and its phase, and doctor flight agrees"
