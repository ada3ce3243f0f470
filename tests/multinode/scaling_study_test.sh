#!/usr/bin/env bash
# scaling_study_test.sh CASE: one check of launch/scaling-study.sh per ctest.
#   local        np 1,2 with plain mpirun on a tiny synthetic set: the CSV has its
#                header and one row per np with positive samples/s, efficiency 1
#                at np=1 and the global batch ringtrain reported; the PNG is a PNG
#   strong       np 1,2 with --global-batch 16: both rows report global batch 16
#                (ranks run --batch 16 and 8)
#   netns        the same as local on launch/netns-cluster --netns-nodes 2: np=2 runs on
#                2 nodes (exit 77 where this machine cannot host a cluster)
#   bad_options  wrong options fail at once with a message naming the option,
#                and run nothing
# Needs RINGTRAIN_EXE (the built ringtrain binary) and gnuplot (gnuplot-nox,
# installed by launch/install-deps.sh).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
study=$root/launch/scaling-study.sh
exe=${RINGTRAIN_EXE:?RINGTRAIN_EXE must name the ringtrain binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; exit 0; }

make_data() {
  "$exe" convert synthetic --n 512 --shape 1,8,8 --classes 4 -o "$tmp/f.h5" >"$tmp/convert.log" 2>&1 ||
    { cat "$tmp/convert.log"; fail "ringtrain convert synthetic failed"; }
}

# run_study ARGS... [-- TRAIN-FLAGS]: the study with the tiny config, bounded;
# sets rc. TRAIN-FLAGS default to --batch 8.
run_study() {
  local opts=() train=(--batch 8)
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  [ $# -eq 0 ] || { shift; train=("$@"); }
  timeout --kill-after=10 240 "$study" --exe "$exe" --steps 20 --run-timeout 100 --oversubscribe \
    -o "$tmp/out" "${opts[@]}" -- --data "$tmp/f.h5" --model mlp:64-32-4 --seed 3 --device cpu "${train[@]}" >"$tmp/study.log" 2>&1
  rc=$?
  cat "$tmp/study.log"
  echo "--- exit code $rc"
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "the study hung"
}

# check_outputs NODES_AT_NP2 [GLOBAL_BATCH]: CSV header, two rows, the PNG's
# magic bytes. The global batch is 8 x np without GLOBAL_BATCH.
check_outputs() {
  local csv=$tmp/out/scaling.csv png=$tmp/out/scaling.png gb=${2:-0}
  [ -f "$csv" ] || fail "no $csv"
  [ "$(head -n 1 "$csv")" = "np,nodes,global_batch,samples_per_s,scaling_efficiency,exposed_comm_share" ] ||
    fail "CSV header is '$(head -n 1 "$csv")'"
  [ "$(wc -l <"$csv")" -eq 3 ] || fail "CSV has $(($(wc -l <"$csv") - 1)) rows, expected 2"
  awk -F, -v nodes2="$1" -v gb="$gb" '
    NR == 1 { next }
    { row = NR - 1; want = gb > 0 ? gb : 8 * row }
    NF != 6 { print "row " row ": " NF " fields"; bad = 1 }
    $1 != row { print "row " row ": np " $1 ", expected " row; bad = 1 }
    $3 != want { print "row " row ": global batch " $3 ", expected " want; bad = 1 }
    !($4 > 0) { print "row " row ": samples/s " $4 " is not positive"; bad = 1 }
    !($5 > 0) { print "row " row ": efficiency " $5 " is not positive"; bad = 1 }
    !($6 >= 0 && $6 <= 1) { print "row " row ": exposed comm share " $6 " is not in [0, 1]"; bad = 1 }
    row == 1 && ($2 != 1 || $5 != 1) { print "row 1: nodes " $2 ", efficiency " $5 ", expected 1 and 1"; bad = 1 }
    row == 2 && $2 != nodes2 { print "row 2: nodes " $2 ", expected " nodes2; bad = 1 }
    END { exit bad }' "$csv" || { cat "$csv"; fail "CSV rows are wrong"; }
  for n in 1 2; do
    [ -s "$tmp/out/runs/np$n/metrics.jsonl" ] && [ -s "$tmp/out/runs/np$n/output.log" ] ||
      fail "run np$n kept no metrics.jsonl or output.log"
  done
  [ -f "$png" ] || fail "no $png"
  [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$png is not a PNG"
  cat "$csv"
}

command -v gnuplot >/dev/null || fail "gnuplot is not installed (launch/install-deps.sh installs gnuplot-nox)"

case ${1:-} in
  local)
    make_data
    run_study --np 1,2
    [ "$rc" -eq 0 ] || fail "the study exited with $rc"
    check_outputs 1
    pass "np 1,2 on one node: CSV and PNG" ;;
  strong)
    make_data
    run_study --np 1,2 --global-batch 16 -- --accum 1
    [ "$rc" -eq 0 ] || fail "the study exited with $rc"
    check_outputs 1 16
    grep -q -- "--batch 8 " "$tmp/out/runs/np2/command" || fail "np=2 did not run --batch 8: $(cat "$tmp/out/runs/np2/command")"
    pass "np 1,2 at global batch 16 (strong scaling): CSV and PNG" ;;
  netns)
    reason=$("$root/launch/netns-cluster" --check 2>&1)
    case $? in
      0) ;;
      77) echo "SKIPPED: $reason"; exit 77 ;;
      *) fail "netns-cluster --check: $reason" ;;
    esac
    make_data
    run_study --np 1,2 --netns-nodes 2
    [ "$rc" -eq 0 ] || fail "the study exited with $rc"
    check_outputs 2
    pass "np 1,2 on a 2-node namespace cluster: CSV and PNG, np=2 on 2 nodes" ;;
  bad_options)
    expect_error() {  # expect_error REGEX ARGS...
      local regex=$1 out
      shift
      out=$(timeout 30 "$study" --exe "$exe" "$@" 2>&1)
      rc=$?
      echo "$out"
      [ "$rc" -eq 2 ] || fail "expected exit code 2, got $rc for: $*"
      printf '%s\n' "$out" | grep -Eq -- "$regex" || fail "message does not match /$regex/ for: $*"
      [ ! -e "$tmp/bad/runs/np1" ] || fail "a run was started despite the error"
    }
    expect_error "-o DIR is required" -- --data x.h5
    expect_error "no training flags" -o "$tmp/bad"
    expect_error "--np must be a comma-separated list .* got '1,,2'" --np 1,,2 -o "$tmp/bad" -- --data x.h5
    expect_error "--np lists a rank count twice" --np 2,1,2 -o "$tmp/bad" -- --data x.h5
    expect_error "--np: rank counts must be >= 1, got '0'" --np 0,1 -o "$tmp/bad" -- --data x.h5
    expect_error "--steps must be a whole number >= 2 .* got '1'" --steps 1 -o "$tmp/bad" -- --data x.h5
    expect_error "--max-np must be a positive whole number, got 'x'" --max-np x -o "$tmp/bad" -- --data x.h5
    expect_error "'--logdir' is set by the study itself" -o "$tmp/bad" -- --data x.h5 --logdir=y
    expect_error "'--max-steps' is set by the study itself" -o "$tmp/bad" -- --data x.h5 --max-steps 5
    expect_error "--global-batch 64 is not divisible by np=3 x accum 1" --global-batch 64 --np 1,3 \
      -o "$tmp/bad" -- --data x.h5
    expect_error "--global-batch 64 is not divisible by np=2 x accum 64" --global-batch 64 --np 1,2 \
      -o "$tmp/bad" -- --data x.h5 --accum=64
    expect_error "--global-batch sets the per-rank --batch" --global-batch 64 -o "$tmp/bad" -- --data x.h5 --batch 4
    expect_error "--machinefile and --netns-nodes exclude each other" --machinefile /dev/null --netns-nodes 2 \
      -o "$tmp/bad" -- --data x.h5
    expect_error "machinefile '$tmp/none' does not exist" --machinefile "$tmp/none" -o "$tmp/bad" -- --data x.h5
    expect_error "unknown option '--data'" -o "$tmp/bad" --data x.h5
    expect_error "ringtrain binary '$tmp/nope' is not an executable" --exe "$tmp/nope" -o "$tmp/bad" -- --data x.h5
    # A run that fails (no such data file) stops the study with the np and the log.
    out=$(timeout 120 "$study" --exe "$exe" --np 1 --steps 4 --run-timeout 60 -o "$tmp/fails" \
            -- --data "$tmp/missing.h5" --device cpu 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a failing run gave exit code $rc"
    printf '%s\n' "$out" | grep -Eq "np=1: the run failed with exit code [0-9]+ \(log: .*/runs/np1/output.log\)" ||
      fail "the failing run is not named with its log"
    [ "$(cat "$tmp/fails/scaling.csv")" = "np,nodes,global_batch,samples_per_s,scaling_efficiency,exposed_comm_share" ] ||
      fail "the CSV of a study that failed at its first run should hold only the header"
    pass "bad options and a failing run give clear errors" ;;
  *) echo "usage: scaling_study_test.sh local|strong|netns|bad_options" >&2; exit 2 ;;
esac
