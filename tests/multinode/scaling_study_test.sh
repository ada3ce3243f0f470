#!/usr/bin/env bash
# scaling_study_test.sh CASE: one check of launch/scaling-study.sh per ctest.
#   local        np 1,2 with plain mpirun on a tiny synthetic set, 2 repeats: the
#                CSV has its header and one row per np with positive samples/s
#                (median within min..max of the repeats), efficiency 1 at np=1
#                and the global batch ringtrain reported; the PNG is a PNG
#   predict      np 1,2, one repeat, --predict 1,2,4,8 with a given comm model:
#                predicted rows for ring and hierarchical, a verdict line
#   netns_predict np 1,2 on 2 namespace nodes with 1 Gbit/s links, --predict
#                1,2,4: the study measures the comm model itself (exit 77 where
#                this machine cannot host a cluster)
#   strong       np 1,2 with --global-batch 16: both rows report global batch 16
#                (ranks run --batch 16 and 8)
#   netns        the same as local on launch/netns-cluster --netns-nodes 2: np=2 runs on
#                2 nodes (exit 77 where this machine cannot host a cluster)
#   bad_options  wrong options fail at once with a message naming the option,
#                and run nothing
#   noisy        repeats far apart get a warning that the machine was noisy
#   noisy_curve  so do the rounds of compute timed for a prediction
#   noisy_rounds each round measures its own comm model; the study keeps the
#                median round's prediction and warns when their predictions spread
#   median_step  a run's samples/s is the global batch over its median step;
#                runs.csv has each run's mean beside it
# Needs RINGTRAIN_EXE (the built ringtrain binary) and gnuplot (gnuplot-nox,
# installed by launch/install-deps.sh).
set -uo pipefail
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
study=$root/launch/scaling-study.sh
exe=${RINGTRAIN_EXE:?RINGTRAIN_EXE must name the ringtrain binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; exit 0; }

make_data() {
  "$exe" convert synthetic --force --n 512 --shape 1,8,8 --classes 4 -o "$tmp/f.h5" >"$tmp/convert.log" 2>&1 ||
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

header="np,nodes,global_batch,samples_per_s,scaling_efficiency,exposed_comm_share,samples_per_s_min,samples_per_s_max,efficiency_min,efficiency_max,repeats,source"

# check_outputs NODES_AT_NP2 [GLOBAL_BATCH [REPEATS [PREDICTED_ROWS]]]: CSV
# header, two measured rows (then PREDICTED_ROWS predicted ones), the PNG's
# magic bytes. The global batch is 8 x np without GLOBAL_BATCH (or with 0).
check_outputs() {
  local csv=$tmp/out/scaling.csv png=$tmp/out/scaling.png gb=${2:-0} reps=${3:-1} npred=${4:-0}
  [ -f "$csv" ] || fail "no $csv"
  [ "$(head -n 1 "$csv")" = "$header" ] || fail "CSV header is '$(head -n 1 "$csv")'"
  [ "$(grep -c ',measured$' "$csv")" -eq 2 ] || fail "CSV has $(grep -c ',measured$' "$csv") measured rows, expected 2"
  [ "$(grep -c ',predicted-' "$csv")" -eq "$npred" ] || fail "CSV has $(grep -c ',predicted-' "$csv") predicted rows, expected $npred"
  grep ',measured$' "$csv" | awk -F, -v nodes2="$1" -v gb="$gb" -v reps="$reps" '
    { row = NR; want = gb > 0 ? gb : 8 * row }
    NF != 12 { print "row " row ": " NF " fields"; bad = 1 }
    $11 != reps { print "row " row ": " $11 " repeats, expected " reps; bad = 1 }
    !($7 <= $4 && $4 <= $8 && $7 > 0) { print "row " row ": samples/s median " $4 " not within min " $7 " .. max " $8; bad = 1 }
    !($9 <= $5 && $5 <= $10) { print "row " row ": efficiency " $5 " not within " $9 " .. " $10; bad = 1 }
    $1 != row { print "row " row ": np " $1 ", expected " row; bad = 1 }
    $3 != want { print "row " row ": global batch " $3 ", expected " want; bad = 1 }
    !($4 > 0) { print "row " row ": samples/s " $4 " is not positive"; bad = 1 }
    !($5 > 0) { print "row " row ": efficiency " $5 " is not positive"; bad = 1 }
    !($6 >= 0 && $6 <= 1) { print "row " row ": exposed comm share " $6 " is not in [0, 1]"; bad = 1 }
    row == 1 && ($2 != 1 || $5 != 1) { print "row 1: nodes " $2 ", efficiency " $5 ", expected 1 and 1"; bad = 1 }
    row == 2 && $2 != nodes2 { print "row 2: nodes " $2 ", expected " nodes2; bad = 1 }
    END { exit bad }' || { cat "$csv"; fail "CSV rows are wrong"; }
  for n in 1 2; do
    for ((k = 1; k <= reps; k++)); do
      [ -s "$tmp/out/runs/np$n/r$k/metrics.jsonl" ] && [ -s "$tmp/out/runs/np$n/r$k/output.log" ] ||
        fail "run np$n repeat $k kept no metrics.jsonl or output.log"
    done
  done
  [ -f "$png" ] || fail "no $png"
  [ "$(head -c 8 "$png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] || fail "$png is not a PNG"
  cat "$csv"
}

command -v gnuplot >/dev/null || fail "gnuplot is not installed (launch/install-deps.sh installs gnuplot-nox)"

case ${1:-} in
  local)
    make_data
    run_study --np 1,2 --repeats 2
    [ "$rc" -eq 0 ] || fail "the study exited with $rc"
    check_outputs 1 0 2
    pass "np 1,2 on one node, 2 repeats: CSV with median/min/max and PNG" ;;
  predict)
    make_data
    # A made-up model (alpha 50 us, 1 Gbit/s across nodes; 5 us, 4 GB/s inside).
    cat >"$tmp/model.json" <<EOF
{"kind": "ringtrain comm model", "poor_bound": 0.25, "tiers": {
 "inter": {"ranks": 2, "nodes": 2, "backends": {"shm": {"alpha_s": 5e-5, "beta_s_per_byte": 8e-9, "poor": false, "max_abs_residual": 0.01}}},
 "intra": {"ranks": 2, "nodes": 1, "backends": {"shm": {"alpha_s": 5e-6, "beta_s_per_byte": 2.5e-10, "poor": false, "max_abs_residual": 0.01}}}}}
EOF
    run_study --np 1,2 --repeats 1 --predict 1,2,4,8 --comm-model "$tmp/model.json"
    [ "$rc" -eq 0 ] || fail "the study exited with $rc"
    check_outputs 1 0 1 8
    [ "$(grep -c ',predicted-ring$' "$tmp/out/scaling.csv")" -eq 4 ] || fail "expected 4 predicted-ring rows"
    [ "$(grep -c ',predicted-hierarchical$' "$tmp/out/scaling.csv")" -eq 4 ] || fail "expected 4 predicted-hierarchical rows"
    grep -Eq "^predicted efficiency at 8 nodes: [0-9]+% \((not )?communication-bound .*with buckets of [0-9.]+ MiB" "$tmp/study.log" ||
      fail "no verdict line for 8 nodes (of 2 ranks each)"
    pass "predicted rows for ring and hierarchical, and a verdict" ;;
  netns_predict)
    reason=$("$root/launch/netns-cluster" --link-rate 1gbit --check 2>&1)
    case $? in
      0) ;;
      77) echo "SKIPPED: $reason"; exit 77 ;;
      *) fail "netns-cluster --check: $reason" ;;
    esac
    make_data
    run_study --np 1,2 --netns-nodes 2 --link-rate 1gbit --repeats 2 --predict 1,2,4 --allow-poor-fit -- --batch 8 --backend ring
    [ "$rc" -eq 0 ] || fail "the study exited with $rc"
    check_outputs 2 0 2 6
    grep -q '"inter"' "$tmp/out/comm-model.json" || fail "the study measured no inter-node tier"
    grep -q 'rate=1gbit' "$tmp/out/comm-model.json" || fail "the comm model does not record the shaped link"
    grep -Eq "^predicted efficiency at 4 nodes: " "$tmp/study.log" || fail "no verdict line"
    # The fit covers the bucket sizes: half to twice the default 1 MiB cap,
    # and the smallest bucket the trace recorded where it is below that.
    "$PYTHON" - "$tmp/out/comm-model.json" "$tmp"/out/runs/np1/r1/trace.json <<'PY' || fail "the comm model was not measured over the bucket sizes"
import json, sys
s = json.load(open(sys.argv[1]))["tiers"]["inter"]["backends"]["ring"]["samples"]
trace = json.load(open(sys.argv[2]))["traceEvents"]
smallest = min(e["args"]["bytes"] for e in trace if e.get("name", "").endswith(" ready"))
want = [524288, 1048576, 2097152]
if smallest < 524288:
    want = [smallest // 4 * 4] + want
assert [x["bytes"] for x in s] == want, (s, smallest, want)
PY
    # The nodes are this machine: the link is also timed beside compute.
    grep -q -- "--under-load" "$tmp/out/comm-model-inter.log.command" || fail "bench model was not run --under-load"
    "$PYTHON" - "$tmp/out/comm-model.json" <<'PY' || fail "the comm model has no under-load fit"
import json, sys
ring = json.load(open(sys.argv[1]))["tiers"]["inter"]["backends"]["ring"]
u = ring["under_load"]
# the same sizes as the fit alone
assert 0 <= u["compute_loss"] <= 1 and [x["bytes"] for x in u["samples"]] == [x["bytes"] for x in ring["samples"]], u
# the fit is also kept under its node count, for bench predict to choose
assert list(json.load(open(sys.argv[1]))["tiers"]["inter_by_nodes"]) == ["2"]
PY
    # ...and right after the compute of a step at the largest point's batch
    # (this study's own timing of it), for the wait for the last rank.
    grep -Eq -- "--after-compute [0-9.]+" "$tmp/out/comm-model-inter.log.command" || fail "bench model was not run --after-compute"
    "$PYTHON" - "$tmp/out/comm-model.json" <<'PY' || fail "the comm model has no after-compute entry"
import json, sys
ring = json.load(open(sys.argv[1]))["tiers"]["inter"]["backends"]["ring"]
a = ring["after_compute"]
assert a["compute_s"] > 0 and a["arrival_wait_s"] >= 0, a
assert [x["bytes"] for x in a["samples"]] == [x["bytes"] for x in ring["samples"]], a
PY
    # Each repeat round measured its own model after its runs, with the
    # compute of that round's timing; the study predicts from every round and
    # keeps the median round's prediction, model and log.
    for k in 1 2; do
      [ -s "$tmp/out/rounds/r$k/comm-model.json" ] && [ -s "$tmp/out/rounds/r$k/predicted.csv" ] ||
        fail "round $k has no comm model or prediction of its own"
      ms=$("$PYTHON" -c 'import json, sys; print("%.3f" % json.loads(open(sys.argv[1]).readlines()[int(sys.argv[2]) - 1])["step_ms_synchronous"])' \
           "$tmp/out/compute-curve/b8.jsonl" "$k")
      grep -q -- "--after-compute $ms" "$tmp/out/rounds/r$k/comm-model-inter.log.command" ||
        fail "round $k's bench model did not run after that round's compute ($ms ms): $(cat "$tmp/out/rounds/r$k/comm-model-inter.log.command")"
      grep -q -- "--comm-model $tmp/out/rounds/r$k/comm-model.json" "$tmp/out/rounds/r$k/predict.log.command" ||
        fail "round $k was not predicted from its own model"
    done
    chosen=$(sed -n "s/^scaling-study.sh: prediction from round \([12]\)'s communication model, the median of the rounds' predicted efficiencies at np=2: .*$/\1/p" "$tmp/study.log")
    [ -n "$chosen" ] || fail "the study did not say which round's prediction it kept"
    # Of two rounds the median is the lower prediction at np=2.
    "$PYTHON" - "$tmp/out" "$chosen" <<'PY' || fail "the study did not keep the round with the lower prediction at np=2"
import csv, sys
out, chosen = sys.argv[1], int(sys.argv[2])
eff = {}
for k in (1, 2):
    rows = [r for r in csv.DictReader(open(f"{out}/rounds/r{k}/predicted.csv")) if r["ranks"] == "2" and r["algorithm"] == "ring"]
    eff[k] = float(rows[0]["scaling_efficiency"])
assert eff[chosen] == min(eff.values()) and (eff[1] != eff[2] or chosen == 1), (eff, chosen)
PY
    cmp -s "$tmp/out/comm-model.json" "$tmp/out/rounds/r$chosen/comm-model.json" &&
      cmp -s "$tmp/out/predicted.csv" "$tmp/out/rounds/r$chosen/predicted.csv" ||
      fail "comm-model.json and predicted.csv are not round $chosen's"
    # 2 netns nodes share this machine's cores: the prediction is told how many each has.
    cores=$(( $(nproc) / 2 )); [ "$cores" -ge 1 ] || cores=1
    grep -q -- "--cores-per-node $cores" "$tmp/out/predict.log.command" || fail "bench predict was not given --cores-per-node $cores"
    pass "np 1,2 on 2 shaped namespace nodes with a measured model and predictions" ;;
  strong)
    make_data
    run_study --np 1,2 --repeats 1 --global-batch 16 -- --accum 1
    [ "$rc" -eq 0 ] || fail "the study exited with $rc"
    check_outputs 1 16
    grep -q -- "--batch 8 " "$tmp/out/runs/np2/r1/command" || fail "np=2 did not run --batch 8: $(cat "$tmp/out/runs/np2/r1/command")"
    [ ! -e "$tmp/out/compute-curve.jsonl" ] || fail "a compute curve without --predict"
    # With --predict, compute is timed at each per-rank batch the prediction
    # needs (16/np for np 1, 2, 4, 16; 16/3 is no whole batch), in --repeats
    # rounds of which each batch keeps the median, and handed to
    # bench predict; the training flags' model and data set are the ones timed.
    cat >"$tmp/model.json" <<EOF
{"kind": "ringtrain comm model", "poor_bound": 0.25, "tiers": {
 "inter": {"ranks": 2, "nodes": 2, "backends": {"shm": {"alpha_s": 5e-5, "beta_s_per_byte": 8e-9, "poor": false, "max_abs_residual": 0.01}}},
 "intra": {"ranks": 2, "nodes": 1, "backends": {"shm": {"alpha_s": 5e-6, "beta_s_per_byte": 2.5e-10, "poor": false, "max_abs_residual": 0.01}}}}}
EOF
    run_study --np 1,2 --repeats 2 --global-batch 16 --predict 1,3,4,16 --ranks-per-node 1 --comm-model "$tmp/model.json" -- --accum 1
    [ "$rc" -eq 0 ] || fail "the study with --predict exited with $rc"
    "$PYTHON" - "$tmp/out/compute-curve.jsonl" <<'PY' || fail "compute-curve.jsonl does not hold batches 16, 8, 4, 1 alone and 8 with 2 ranks at once"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
alone = [r for r in rows if r["ranks_per_host"] == 1]
assert sorted(r["batch"] for r in alone) == [1, 4, 8, 16], rows
assert all(r["ranks"] == 1 for r in alone), rows
# np=2 runs on this machine: batch 8 timed with 2 ranks at once, too
beside = [r for r in rows if r["ranks_per_host"] != 1]
assert [(r["batch"], r["ranks"], r["ranks_per_host"]) for r in beside] == [(8, 2, 2)], rows
assert all(r["model"] == "mlp:64-32-4" and r["step_ms_synchronous"] > 0 for r in rows), rows
# Ranks at once are timed side by side with one rank alone, round by round.
assert all(r["side_by_side_rounds"] == 6 and r["slowdown_beside"] > 0 for r in beside), beside
# Two rounds per point; the curve keeps the lower median: the faster one
# alone, the smaller slowdown with ranks at once.
for r in rows:
    name = "b%d" % r["batch"] + ("" if r["ranks_per_host"] == 1 else "-k%d" % r["ranks_per_host"])
    key = "step_ms_synchronous" if r["ranks_per_host"] == 1 else "slowdown_beside"
    rounds = [json.loads(l) for l in open(sys.argv[1].replace(".jsonl", "") + "/" + name + ".jsonl")]
    assert len(rounds) == 2, (r, rounds)
    assert r[key] == min(x[key] for x in rounds), (r, rounds)
PY
    grep -q -- "--compute-curve $tmp/out/compute-curve.jsonl --profile-batch 16 --colocation all" "$tmp/out/predict.log.command" ||
      fail "bench predict was not given the curve and the profiled batch: $(cat "$tmp/out/predict.log.command")"
    grep -q "^# compute per rank from the curve .*measured at batch 1,4,8,16" "$tmp/study.log" || fail "the study did not show the curve line"
    grep -q "^# 3 rank(s) at once on one machine at 3 node(s): batch [0-9.]* takes .* (a synchronous step, measured with 2 at once, side by side with one rank alone)" "$tmp/study.log" ||
      fail "the study did not show the slowdown of ranks at once (3 nodes: the 2 measured)"
    # The step profile is the trace of np=1's median run: with two repeats,
    # the slower one.
    slow=$(for k in 1 2; do printf '%s %s\n' "$(grep -o 'np=1, repeat '$k': .*, [0-9.e+]* samples/s' "$tmp/study.log" | grep -o '[0-9.e+]* samples/s' | cut -d' ' -f1)" "$k"; done | sort -g | head -n 1 | cut -d' ' -f2)
    grep -q "step profile: np=1 repeat $slow (the median samples/s of its repeats)" "$tmp/study.log" || fail "the profile is not from np=1's slower repeat ($slow)"
    grep -q -- "--trace $tmp/out/runs/np1/r$slow/trace.json" "$tmp/out/predict.log.command" || fail "bench predict was not given np=1 repeat $slow's trace"
    pass "np 1,2 at global batch 16 (strong scaling): CSV and PNG; with --predict, compute timed at each per-rank batch" ;;
  netns)
    reason=$("$root/launch/netns-cluster" --check 2>&1)
    case $? in
      0) ;;
      77) echo "SKIPPED: $reason"; exit 77 ;;
      *) fail "netns-cluster --check: $reason" ;;
    esac
    make_data
    run_study --np 1,2 --repeats 1 --netns-nodes 2
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
    expect_error "--repeats must be a positive whole number, got '0'" --repeats 0 -o "$tmp/bad" -- --data x.h5
    expect_error "--predict must be a comma-separated list of node counts" --predict 1,x -o "$tmp/bad" -- --data x.h5
    expect_error "--link-rate and --link-delay shape the links of --netns-nodes" --link-rate 1gbit -o "$tmp/bad" -- --data x.h5
    expect_error "--delayed-acks sets the TCP of --netns-nodes; give --netns-nodes" --delayed-acks -o "$tmp/bad" -- --data x.h5
    expect_error "--comm-model '$tmp/none' does not exist" --predict 1,2 --comm-model "$tmp/none" -o "$tmp/bad" -- --data x.h5
    echo "localhost slots=2" >"$tmp/hosts"
    expect_error "--predict on --machinefile needs --comm-model" --predict 1,2 --machinefile "$tmp/hosts" -o "$tmp/bad" -- --data x.h5
    expect_error "--comm-model, --predict-backend, --ranks-per-node and --cores-per-node go with --predict" --ranks-per-node 2 -o "$tmp/bad" -- --data x.h5
    expect_error "--comm-model, --predict-backend, --ranks-per-node and --cores-per-node go with --predict" --cores-per-node 2 -o "$tmp/bad" -- --data x.h5
    expect_error "--cores-per-node must be a positive whole number, got '0'" --predict 1,2 --cores-per-node 0 -o "$tmp/bad" -- --data x.h5
    expect_error "'--trace' is set by the study itself" -o "$tmp/bad" -- --data x.h5 --trace t.json
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
    out=$(timeout 120 "$study" --exe "$exe" --np 1 --repeats 1 --steps 4 --run-timeout 60 -o "$tmp/fails" \
            -- --data "$tmp/missing.h5" --device cpu 2>&1)
    rc=$?
    echo "$out"
    [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "a failing run gave exit code $rc"
    printf '%s\n' "$out" | grep -Eq "np=1: the run failed with exit code [0-9]+ \(log: .*/runs/np1/r1/output.log\)" ||
      fail "the failing run is not named with its log"
    [ "$(cat "$tmp/fails/scaling.csv")" = "$header" ] ||
      fail "the CSV of a study that failed at its first run should hold only the header"
    pass "bad options and a failing run give clear errors" ;;
  noisy)
    # A stand-in train whose throughput is set per call: repeats far apart
    # get a warning that the machine was noisy, repeats close together none.
    cat >"$tmp/fake" <<'STUB'
#!/bin/sh
# Rank 0 reports the next rate of $RATES (one per call) in two windows.
[ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] || exit 0
n=$(($(cat "$CALLS" 2>/dev/null || echo 0) + 1)); echo "$n" >"$CALLS"
rate=$(echo "$RATES" | cut -d, -f"$n")
while [ $# -gt 0 ]; do [ "$1" = --logdir ] && dir=$2; shift; done
echo "ringtrain train: ${OMPI_COMM_WORLD_SIZE:-1} rank(s) on 1 node(s), backend ring"
echo "  global batch $((8 * ${OMPI_COMM_WORLD_SIZE:-1})) = 8 per rank"
for step in 4 8; do
  echo "{\"kind\":\"train\",\"step\":$step,\"samples_per_s\":$rate,\"step_s\":0.01,\"exposed_comm_s\":0}" >>"$dir/metrics.jsonl"
done
STUB
    chmod +x "$tmp/fake"
    export CALLS=$tmp/calls
    noisy_study() {  # noisy_study RATES
      rm -f "$CALLS"
      RATES=$1 timeout --kill-after=10 120 "$study" --exe "$tmp/fake" --np 1 --repeats 3 --steps 20 -o "$tmp/out" -- --data x.h5 >"$tmp/study.log" 2>&1
      rc=$?
      cat "$tmp/study.log"
      [ "$rc" -eq 0 ] || fail "the study exited with $rc"
    }
    noisy_study 1000,1500,1010
    grep -q "warning: the 3 repeats at np=1 spread 50% of their median (1000.0 to 1500.0 samples/s): the machine was noisy" "$tmp/study.log" ||
      fail "no noise warning for repeats 50% apart"
    noisy_study 1000,1100,1050
    ! grep -q "the machine was noisy" "$tmp/study.log" || fail "a noise warning for repeats 10% apart"
    pass "repeats far apart are called noisy, close ones are not" ;;
  noisy_curve)
    # The real ringtrain, but 'bench step' answers with the next time of
    # $STEP_TIMES: compute rounds far apart get a warning that the prediction is
    # not to be trusted, rounds close together none.
    make_data
    cat >"$tmp/wrap" <<STUB
#!/bin/sh
if [ "\$1 \$2" = "bench step" ]; then
  n=\$((\$(cat "\$CALLS" 2>/dev/null || echo 0) + 1)); echo "\$n" >"\$CALLS"
  t=\$(echo "\$STEP_TIMES" | cut -d, -f"\$n")
  echo "{\"model\": \"mlp:64-32-4\", \"batch\": 8, \"step_ms\": \$t, \"step_ms_slowest_rank\": \$t, \"step_ms_synchronous\": \$t, \"ranks\": 1, \"ranks_per_host\": 1}"
  exit 0
fi
exec "$exe" "\$@"
STUB
    chmod +x "$tmp/wrap"
    cat >"$tmp/model.json" <<EOF
{"kind": "ringtrain comm model", "poor_bound": 0.25, "tiers": {
 "inter": {"ranks": 2, "nodes": 2, "backends": {"shm": {"alpha_s": 5e-5, "beta_s_per_byte": 8e-9, "poor": false, "max_abs_residual": 0.01}}}}}
EOF
    export CALLS=$tmp/calls
    curve_study() {  # curve_study STEP_TIMES
      rm -f "$CALLS"
      STEP_TIMES=$1 timeout --kill-after=10 240 "$study" --exe "$tmp/wrap" --steps 20 --np 1 --repeats 3 --predict 1,2 \
        --ranks-per-node 1 --comm-model "$tmp/model.json" -o "$tmp/out" -- --data "$tmp/f.h5" --model mlp:64-32-4 \
        --batch 8 --device cpu >"$tmp/study.log" 2>&1
      rc=$?
      cat "$tmp/study.log"
      [ "$rc" -eq 0 ] || fail "the study exited with $rc"
    }
    curve_study 1.0,1.5,1.01
    grep -q "warning: the 3 rounds of compute at batch 8 alone (ms) spread 50% of their median (1.000-1.500): the machine was noisy" "$tmp/study.log" ||
      fail "no noise warning for compute rounds 50% apart"
    curve_study 1.0,1.1,1.05
    ! grep -q "rounds of compute" "$tmp/study.log" || fail "a noise warning for compute rounds 10% apart"
    pass "compute rounds far apart are called noisy, close ones are not" ;;
  noisy_rounds)
    # The real ringtrain, but 'bench model' (rank 0) writes a model whose
    # latency is the next of $ALPHAS: each repeat round measures its own model
    # (no --comm-model), the study predicts from each and keeps the median
    # round's, and rounds whose predictions are far apart get a warning.
    make_data
    cat >"$tmp/wrap" <<STUB
#!/bin/sh
if [ "\$1 \$2" = "bench model" ]; then
  [ "\${OMPI_COMM_WORLD_RANK:-0}" = 0 ] || exit 0
  n=\$((\$(cat "\$CALLS" 2>/dev/null || echo 0) + 1)); echo "\$n" >"\$CALLS"
  a=\$(echo "\$ALPHAS" | cut -d, -f"\$n")
  while [ \$# -gt 0 ]; do [ "\$1" = --json ] && json=\$2; shift; done
  echo "{\"kind\": \"ringtrain comm model\", \"poor_bound\": 0.25, \"tiers\": {\"intra\": {\"ranks\": 2, \"nodes\": 1, \"backends\": {\"shm\": {\"alpha_s\": \$a, \"beta_s_per_byte\": 1e-10, \"poor\": false, \"max_abs_residual\": 0.01}}}}}" >"\$json"
  echo "intra shm: alpha \$a s per step: good fit"
  exit 0
fi
exec "$exe" "\$@"
STUB
    chmod +x "$tmp/wrap"
    export CALLS=$tmp/calls
    rounds_study() {  # rounds_study ALPHAS
      rm -f "$CALLS"
      ALPHAS=$1 timeout --kill-after=10 240 "$study" --exe "$tmp/wrap" --steps 20 --np 1,2 --repeats 3 --predict 1 \
        --cores-per-node 4 --oversubscribe -o "$tmp/out" -- --data "$tmp/f.h5" --model mlp:64-32-4 --batch 8 --device cpu \
        >"$tmp/study.log" 2>&1
      rc=$?
      cat "$tmp/study.log"
      [ "$rc" -eq 0 ] || fail "the study exited with $rc"
      [ "$(cat "$CALLS")" = 3 ] || fail "bench model ran $(cat "$CALLS") time(s), not once per round"
    }
    # A slower link, a lower efficiency: the median round is the one of 2e-4.
    rounds_study 1e-4,4e-4,2e-4
    grep -q "prediction from round 3's communication model, the median of the rounds' predicted efficiencies at np=2: " "$tmp/study.log" ||
      fail "the study did not keep round 3 (alpha 2e-4, the median)"
    grep -q '"alpha_s": 2e-4' "$tmp/out/comm-model.json" || fail "comm-model.json is not round 3's"
    grep -q "warning: the 3 rounds' predictions spread [0-9]*% of their median" "$tmp/study.log" ||
      fail "no warning for rounds whose models are 4x apart"
    rounds_study 1e-4,1.01e-4,1.02e-4
    ! grep -q "rounds' predictions spread" "$tmp/study.log" || fail "a warning for rounds 2% apart"
    pass "each round's own comm model: the median round's prediction, and a warning when they spread" ;;
  median_step)
    # A stand-in train with a slow spell: windows of 4 steps at 10 ms and one at
    # 40 ms, and a summary whose median step is 10 ms. The CSV's samples/s is
    # the global batch over the median step (800 at np=1, 1600 at np=2: batch
    # 8 per rank); runs.csv keeps the mean beside it (samples over the later
    # windows' time: 4 x 8 x np samples per window, 3 windows in 240 ms).
    cat >"$tmp/fake" <<'STUB'
#!/bin/sh
[ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] || exit 0
np=${OMPI_COMM_WORLD_SIZE:-1}
while [ $# -gt 0 ]; do [ "$1" = --logdir ] && dir=$2; shift; done
echo "ringtrain train: $np rank(s) on 1 node(s), backend ring"
echo "  global batch $((8 * np)) = 8 per rank"
for w in "4 0.01" "8 0.01" "12 0.04" "16 0.01"; do
  set -- $w
  rate=$(awk -v np="$np" -v t="$2" 'BEGIN { print 8 * np / t }')
  echo "{\"kind\":\"train\",\"step\":$1,\"samples_per_s\":$rate,\"step_s\":0.009,\"exposed_comm_s\":0,\"window_steps\":4,\"window_step_s\":$2,\"window_exposed_comm_s\":0.001}" >>"$dir/metrics.jsonl"
done
echo "{\"kind\":\"summary\",\"step\":16,\"samples_per_s\":1,\"step_s_median\":0.01,\"median_steps\":12}" >>"$dir/metrics.jsonl"
STUB
    chmod +x "$tmp/fake"
    timeout --kill-after=10 120 "$study" --exe "$tmp/fake" --np 1,2 --repeats 1 --steps 20 --oversubscribe -o "$tmp/out" -- --data x.h5 >"$tmp/study.log" 2>&1
    rc=$?
    cat "$tmp/study.log"
    [ "$rc" -eq 0 ] || fail "the study exited with $rc"
    cat "$tmp/out/scaling.csv" "$tmp/out/runs.csv"
    grep -q '^1,1,8,800.0,1.0000,0.0500,800.0,800.0,1.0000,1.0000,1,measured$' "$tmp/out/scaling.csv" ||
      fail "np=1: samples/s is not the global batch over the median step (800)"
    grep -q '^2,1,16,1600.0,1.0000,' "$tmp/out/scaling.csv" || fail "np=2: samples/s is not 1600"
    [ "$(head -n 1 "$tmp/out/runs.csv")" = "np,repeat,nodes,global_batch,samples_per_s,samples_per_s_mean,exposed_comm_share" ] ||
      fail "runs.csv header is '$(head -n 1 "$tmp/out/runs.csv")'"
    grep -q '^1,1,1,8,800,400,0.05' "$tmp/out/runs.csv" || fail "runs.csv: np=1 should have the mean 400 beside 800"
    grep -q '^2,1,1,16,1600,800,0.05' "$tmp/out/runs.csv" || fail "runs.csv: np=2 should have the mean 800 beside 1600"
    pass "samples/s from the median step, the mean beside it in runs.csv" ;;
  *) echo "usage: scaling_study_test.sh local|strong|predict|netns|netns_predict|bad_options|noisy|noisy_curve|median_step" >&2; exit 2 ;;
esac
