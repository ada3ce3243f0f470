#!/usr/bin/env bash
# validate_scaling_test.sh CASE: launch/bench/validate-scaling.sh without
# running a study (those take minutes each and need root):
#   table        --table-only on a made-up study directory: the row has the
#                measured efficiency at the largest node count with its
#                min-max, the ring prediction (not the hierarchical one), the
#                error, the mean efficiency from runs.csv, the wait and the
#                lag from the comm model and the noise warnings from the study's log; a
#                case with no study is named as failed and the exit status is 1
#   dry_run      --dry-run prints the 16 study commands with the README's flags
#   bad_options  wrong options fail at once with a message naming the option
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
validate=$root/launch/bench/validate-scaling.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; exit 0; }

case ${1:-} in
  table)
    d=$tmp/v/n2-mlp-1gbit-weak
    mkdir -p "$d"
    cat >"$d/scaling.csv" <<'CSV'
np,nodes,global_batch,samples_per_s,scaling_efficiency,exposed_comm_share,samples_per_s_min,samples_per_s_max,efficiency_min,efficiency_max,repeats,source
1,1,64,1000.0,1.0000,0.1000,900.0,1100.0,0.9000,1.1000,3,measured
2,2,128,1800.0,0.9000,0.2000,1700.0,1900.0,0.8500,0.9500,3,measured
2,2,128,1800.0,0.8000,0.2000,1800.0,1800.0,0.8000,0.8000,0,predicted-ring
2,2,128,1800.0,0.9500,0.2000,1800.0,1800.0,0.9500,0.9500,0,predicted-hierarchical
4,4,256,3000.0,0.7000,0.3000,3000.0,3000.0,0.7000,0.7000,0,predicted-ring
CSV
    cat >"$d/runs.csv" <<'CSV'
np,repeat,nodes,global_batch,samples_per_s,samples_per_s_mean,exposed_comm_share
1,1,1,64,1000.0,1100.0,0.1
2,1,2,128,1800.0,1700.0,0.2
1,2,1,64,1000.0,900.0,0.1
2,2,2,128,1800.0,1800.0,0.2
1,3,1,64,1000.0,1000.0,0.1
2,3,2,128,1800.0,1750.0,0.2
CSV
    echo '{"kind": "ringtrain comm model", "tiers": {"inter": {"backends": {"ring": {"alpha_s": 1e-5, "beta_s_per_byte": 1e-9, "after_compute": {"arrival_wait_s": 0.0012, "arrival_lag_s": 0.0031}}}}}}' >"$d/comm-model.json"
    {
      echo "scaling-study.sh: warning: the 3 repeats at np=2 spread 20% of their median (1700.0 to 1900.0 samples/s): the machine was noisy"
      echo "scaling-study.sh: warning: the 3 rounds of the slowdown at batch 64 with 2 rank(s) at once spread 18% of their median (1.100-1.300): the machine was noisy"
      echo "scaling-study.sh: warning: the 3 rounds' predictions spread 17% of their median (0.700 to 0.830): the measured link speed changed between rounds, so the prediction is not to be trusted"
    } >"$tmp/v/n2-mlp-1gbit-weak.log"
    "$validate" -o "$tmp/v" --table-only --nodes 2 --links 1gbit --models mlp --scalings weak >"$tmp/out" 2>&1 ||
      { cat "$tmp/out"; fail "--table-only on a complete case exited non-zero"; }
    cat "$tmp/out"
    want='| 2 | mlp | 1 Gbit/s | weak | 0.900 (0.850-0.950) | 0.800 | +12.5% | no | 0.875 (+9.4%) | 1.2 | 3.1 | repeats np=2, slowdown b64x2, predictions |'
    grep -qxF "$want" "$tmp/v/validation.md" || fail "the row is not: $want"
    grep -qxF "0 of 1 within 10% by the median step, 1 by the means." "$tmp/v/validation.md" || fail "no summary line"
    "$validate" -o "$tmp/v" --table-only --nodes 2 --links 1gbit --models mlp --scalings weak,strong >"$tmp/out2" 2>&1 &&
      { cat "$tmp/out2"; fail "a case without a study should make the exit status 1"; }
    grep -q '^| 2 | mlp | 1 Gbit/s | strong | failed: ' "$tmp/v/validation.md" || { cat "$tmp/out2"; fail "the missing case is not named as failed"; }
    grep -q '1 case(s) without a result' "$tmp/v/validation.md" || fail "the summary does not count the missing case"
    pass "the table row and summary" ;;
  dry_run)
    RINGTRAIN_EXE=/bin/true "$validate" -o "$tmp/v" --dry-run >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "--dry-run failed"; }
    [ "$(grep -c 'scaling-study.sh --netns-nodes' "$tmp/out")" -eq 16 ] || { cat "$tmp/out"; fail "not 16 study commands"; }
    grep -q -- '--netns-nodes 3 --link-rate 10gbit --np 1\\,2\\,3 .*--steps 30 --predict 1\\,2\\,3\\,4\\,8 .*-o '"$tmp"'/v/n3-cnn-10gbit-strong --global-batch 96 -- .*--model cnn --backend ring' "$tmp/out" ||
      { cat "$tmp/out"; fail "no 3-node cnn strong command with the README's flags"; }
    grep -q -- '-o '"$tmp"'/v/n2-mlp-1gbit-weak -- .*--model mlp:784-512-512-10 --backend ring --batch 64' "$tmp/out" ||
      { cat "$tmp/out"; fail "no 2-node mlp weak command with --batch 64"; }
    # 5 repeats per point unless told: a 3-rank run on 2 cores is sometimes
    # slow as a whole, and two slow runs of 3 would set the median.
    [ "$(grep -c -- '--repeats 5 ' "$tmp/out")" -eq 16 ] || { cat "$tmp/out"; fail "not 5 repeats by default"; }
    [ ! -e "$tmp/v" ] || fail "--dry-run created the output directory"
    ! grep -q -- '--delayed-acks' "$tmp/out" || { cat "$tmp/out"; fail "delayed ACKs without --delayed-acks"; }
    RINGTRAIN_EXE=/bin/true "$validate" -o "$tmp/v" --dry-run --delayed-acks >"$tmp/out" 2>&1 || { cat "$tmp/out"; fail "--dry-run --delayed-acks failed"; }
    [ "$(grep -c -- '--delayed-acks -- ' "$tmp/out")" -eq 16 ] || { cat "$tmp/out"; fail "--delayed-acks not passed to the 16 studies"; }
    pass "16 study commands" ;;
  bad_options)
    check() {  # check WORD ARGS...: exit 2 and a message with WORD
      local word=$1; shift
      "$validate" "$@" >"$tmp/out" 2>&1; local rc=$?
      [ "$rc" -eq 2 ] || { cat "$tmp/out"; fail "$* exited $rc, not 2"; }
      grep -q -- "$word" "$tmp/out" || { cat "$tmp/out"; fail "$* did not name $word"; }
    }
    check "-o DIR" --dry-run
    check "--nodes" -o "$tmp/v" --nodes 1 --dry-run
    check "--models" -o "$tmp/v" --models resnet --dry-run
    check "--scalings" -o "$tmp/v" --scalings both --dry-run
    check "--links" -o "$tmp/v" --links fast --dry-run
    check "--repeats" -o "$tmp/v" --repeats 0 --dry-run
    check "unknown option" -o "$tmp/v" --bogus
    check "no directory" -o "$tmp/none" --table-only
    pass "bad options fail with messages" ;;
  *) echo "usage: $0 table|dry_run|bad_options"; exit 2 ;;
esac
