#!/usr/bin/env bash
# Flight records belong to their job: a 2-rank job in a directory where a
# 3-rank job left its records reads only its own, and `doctor flight` says
# which job it reads and which records it ignored.
source "$(dirname "$0")/lib.sh"
flight=$WORK/flight
run=(--data "$DATA" --model "$MLP" --batch 8 --max-steps 3 --device cpu --timeout 60 --flight-dir "$flight")
"${MPIRUN[@]}" -np 3 "$RINGTRAIN_EXE" train "${run[@]}" > "$WORK/first.log" 2>&1 || { cat "$WORK/first.log"; fail "first job"; }
[ -e "$flight/rank-2.json" ] || fail "the 3-rank job left no record of rank 2"
first_job=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$flight/rank-2.json")
[ -n "$first_job" ] || fail "the record carries no job"
# The second job fails (a NaN stops it): its verdict must not count rank 2.
rc=0
env RINGTRAIN_FAULT_NAN_RANK=1 "${MPIRUN[@]}" -x RINGTRAIN_FAULT_NAN_RANK -np 2 "$RINGTRAIN_EXE" train "${run[@]}" \
  > "$WORK/second.log" 2>&1 || rc=$?
[ $rc -eq 3 ] || { cat "$WORK/second.log"; fail "second job: exit code $rc, expected 3"; }
! grep -E "flight verdict:.*rank 2|left no record" "$WORK/second.log" \
  || { cat "$WORK/second.log"; fail "the second job's verdict counts the first job's rank 2"; }
"$RINGTRAIN_EXE" doctor flight "$flight" > "$WORK/doctor.txt" 2>&1 || { cat "$WORK/doctor.txt"; fail "doctor flight"; }
cat "$WORK/doctor.txt"
second_job=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["job"])' "$flight/rank-0.json")
[ "$second_job" != "$first_job" ] || fail "two launches share the job identity '$first_job'"
grep -qF "job: $second_job, 2 rank(s)" "$WORK/doctor.txt" || fail "doctor does not name the job it reads"
grep -qF "ignored: the records of rank 2, left by another job ($first_job)" "$WORK/doctor.txt" \
  || fail "doctor does not say it ignored the first job's rank 2"
grep -q "^verdict: .*ended with: .*non-finite" "$WORK/doctor.txt" || fail "doctor's verdict"
! grep -Eq "^ +2 " "$WORK/doctor.txt" || fail "doctor's table shows the first job's rank 2"
echo "PASS: the flight records of an earlier job are told apart and ignored"
