#!/usr/bin/env bash
# A multi-rank failure prints one line per distinct message, not one per rank:
# where ranks fail alike (the same bad flag, data that every rank refuses, a
# model that fits no rank's data), the lowest of them says it once and names
# the others; where they fail differently, each distinct message is said
# once. Every case ends at once with its exit code, under mpirun with 3 ranks.
# (Bad input only, exit 2: a runtime failure is said at once by each rank.)
# A data set that one rank alone cannot open is said by that rank, once: the
# others, which learn its error to stop with it, say nothing. And nothing of
# Open MPI's after it: no MPI_ABORT box, no "more process has sent help
# message" lines, no ORTE_ERROR_LOG (Open MPI 4 printed the box once per
# aborting rank and sometimes garbled one into an ORTE_ERROR_LOG line).
source "$(dirname "$0")/lib.sh"
: "${MAKE_FIXTURES:?}"
FX=$WORK/fixtures
"$MAKE_FIXTURES" "$FX" > /dev/null || fail "cannot make the data fixtures"

# lines NAME REGEX COUNT: the log holds COUNT lines matching REGEX, and no
# line of Open MPI's abort noise.
lines() {  # NAME REGEX COUNT
  local n
  n=$(grep -cE -- "$2" "$WORK/$1.log" || true)
  [ "$n" -eq "$3" ] || { cat "$WORK/$1.log"; fail "$1: $n lines match /$2/, expected $3"; }
  ! grep -qE "MPI_ABORT|sent help message|orte_base_help_aggregate|ORTE_ERROR_LOG" "$WORK/$1.log" \
    || { cat "$WORK/$1.log"; fail "$1: Open MPI's abort noise after the message"; }
}

# The same bad flag on every rank (found before MPI starts).
expect 2 same_bad_flag "\[rank 0/[^]]*\] error: --data: File does not exist: .*nope.h5.*\[the same on ranks 0-2 \(all\)\]" \
  "${MPIRUN[@]}" -np 3 "$R" train --data "$WORK/nope.h5" --model "$MLP"
lines same_bad_flag "File does not exist" 1

# Data that every rank refuses when it opens it (a label out of range).
expect 2 same_bad_data "\[rank 0/[^]]*\] fatal: .*label_range.h5.*\[the same on ranks 0-2 \(all\)\]" \
  "${MPIRUN[@]}" -np 3 "$R" train --data "$FX/label_range.h5" --model mlp:64-3 --device cpu
lines same_bad_data "label_range.h5" 1

# A model that fits no rank's data: every rank builds it and fails alike.
expect 2 same_bad_model "\[rank 0/[^]]*\] fatal: .*\[the same on ranks 0-2 \(all\)\]" \
  "${MPIRUN[@]}" -np 3 "$R" train --data "$DATA" --model mlp:99-3 --batch 8 --device cpu
lines same_bad_model "fatal" 1

# Different messages: rank 0 is given one wrong model, ranks 1 and 2 another.
# Two lines: rank 0's own, and ranks 1-2's said once by rank 1.
expect 2 two_messages "\[rank 1/[^]]*\] fatal: .*\[the same on ranks 1,2\]" \
  "${MPIRUN[@]}" -np 1 "$R" train --data "$DATA" --model mlp:99-3 --batch 8 --device cpu : \
  -np 2 "$R" train --data "$DATA" --model mlp:77-3 --batch 8 --device cpu
lines two_messages "fatal" 2
grep -qE "\[rank 0/[^]]*\] fatal: .*input \[99\]" "$WORK/two_messages.log" && ! grep -qE "input \[99\].*\[the same" "$WORK/two_messages.log" \
  || { cat "$WORK/two_messages.log"; fail "two_messages: rank 0's own message is not said by rank 0 alone"; }

# A rank that fails alone still says its line, once (the others wait for it
# in a collective until the abort ends them).
expect 2 one_rank_fails "\[rank 2/[^]]*\] fatal: .*99" \
  "${MPIRUN[@]}" -np 2 "$R" train --data "$DATA" --model "$MLP" --batch 8 --device cpu --max-steps 2000 : \
  -np 1 "$R" train --data "$DATA" --model mlp:99-3 --batch 8 --device cpu --max-steps 2000
# (the model's own words: the others' lines name rank 2's process, whose id
# may contain 99)
lines one_rank_fails "fatal: .*expects input \\[99\\]" 1
# A data set that only rank 1 cannot open (a truncated copy): rank 1 says it,
# naming its file and the cause; rank 0, which opened its own, stops with it
# and says nothing (it said "rank 1 could not open its data set: ..." too).
head -c 5000 "$DATA" > "$WORK/truncated.h5"
expect 2 one_rank_bad_data "\[rank 1/[^]]*\] fatal: .*truncated.h5.*cannot be opened" \
  "${MPIRUN[@]}" -np 1 "$R" train --data "$DATA" --model "$MLP" --batch 8 --device cpu : \
  -np 1 "$R" train --data "$WORK/truncated.h5" --model "$MLP" --batch 8 --device cpu
lines one_rank_bad_data "fatal" 1
lines one_rank_bad_data "could not open its data set" 0
echo "PASS"
