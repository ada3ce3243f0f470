#!/usr/bin/env bash
# bench_model_test.sh: ringtrain bench model and bench predict end to end.
#   model: 2 ranks on this machine fit the intra-node tier for ring and mpi: a
#          fit line per backend, and a JSON file with alpha/beta and one residual
#          per size; a second run merges into the same file
#   predict: a 1-rank training run's trace and that model give a CSV row per
#          algorithm and a verdict line; missing tiers and poor fits are refused
#          with messages that say what to run
# Needs RINGTRAIN_EXE and mpirun. Timings are never judged, only their shape.
set -uo pipefail
exe=${RINGTRAIN_EXE:?RINGTRAIN_EXE must name the ringtrain binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

run() {  # run LOG CMD...: sets rc, prints the output
  local log=$1
  shift
  timeout --kill-after=10 120 "$@" >"$log" 2>&1
  rc=$?
  cat "$log"
  echo "--- exit code $rc"
}

case ${1:-} in
  model)
    run "$tmp/m.log" mpirun --oversubscribe -np 2 "$exe" bench model --device cpu --backend ring,mpi \
      -b 4K -e 256K -f 4 -n 2 --rounds 3 -w 1 --json "$tmp/model.json"
    [ "$rc" -eq 0 ] || fail "bench model exited with $rc"
    for b in ring mpi; do
      grep -Eq "^intra $b: alpha [0-9.]+ us per step, beta [0-9.e+-]+ ns/B .*largest residual [0-9.]+% \(bound 25%\): (good fit|POOR fit, not used by bench predict)$" "$tmp/m.log" ||
        fail "no fit line for $b"
      grep -Eq "^intra $b: an all-reduce keeps [0-9]+% of a core busy" "$tmp/m.log" || fail "no cpu share line for $b"
      [ "$(grep -Ec "^ +[0-9]+ +[0-9.]+ +[0-9.]+ +-?[0-9.]+% +[0-9]+%$" "$tmp/m.log")" -eq 8 ] || fail "expected 4 sizes x 2 backends of rows"
    done
    python3 - "$tmp/model.json" <<'PY' || fail "the model file is not what bench predict reads"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kind"] == "ringtrain comm model", d
t = d["tiers"]["intra"]
assert t["ranks"] == 2 and t["nodes"] == 1, t
for b in ("ring", "mpi"):
    f = t["backends"][b]
    assert f["alpha_s"] >= 0 and f["beta_s_per_byte"] > 0, f
    assert len(f["samples"]) == 4 and all("residual" in s for s in f["samples"]), f
    assert isinstance(f["poor"], bool)
    assert 0 <= f["cpu_share"] <= 1, f
    assert all(0 <= s["cpu_share"] <= 1 for s in f["samples"]), f
PY
    # A second run keeps the other entries (here: replaces intra, keeps kind).
    run "$tmp/m2.log" mpirun --oversubscribe -np 2 "$exe" bench model --device cpu --backend ring \
      -b 4K -e 64K -n 1 --rounds 1 -w 0 --json "$tmp/model.json"
    [ "$rc" -eq 0 ] || fail "the second bench model exited with $rc"
    grep -q "wrote the intra tier to" "$tmp/m2.log" || fail "no merge message"
    echo "PASS: fits per backend with residuals, and a model file" ;;
  predict)
    "$exe" convert synthetic --n 256 --shape 1,8,8 --classes 4 -o "$tmp/d.h5" >/dev/null 2>&1 || fail "convert failed"
    run "$tmp/t.log" "$exe" train --device cpu --data "$tmp/d.h5" --model mlp:64-32-4 --batch 8 --max-steps 8 \
      --bucket-mb 0.001 --check-every 0 --trace "$tmp/t.json"
    [ "$rc" -eq 0 ] || fail "the training run exited with $rc"
    cat >"$tmp/model.json" <<'JSON'
{"kind": "ringtrain comm model", "poor_bound": 0.25, "tiers": {
 "inter": {"ranks": 2, "nodes": 2, "backends": {"ring": {"alpha_s": 5e-5, "beta_s_per_byte": 8e-9, "poor": false, "max_abs_residual": 0.01, "cpu_share": 0.5}}},
 "intra": {"ranks": 2, "nodes": 1, "backends": {"ring": {"alpha_s": 5e-6, "beta_s_per_byte": 2.5e-10, "poor": true, "max_abs_residual": 0.4}}}}}
JSON
    run "$tmp/p.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/model.json" --nodes 1,2,4
    [ "$rc" -eq 0 ] || fail "bench predict exited with $rc"
    [ "$(grep -Ec '^[124],[124],(ring|hierarchical),' "$tmp/p.log")" -eq 6 ] || fail "expected 3 node counts x 2 algorithms"
    grep -Eq '^1,1,ring,[0-9.e-]+,[0-9.e-]+,0,0,0.0000,1.0000,1.0000,0$' "$tmp/p.log" || fail "one node of one rank is not the compute alone"
    grep -Eq '^[24],[24],ring,.*,0$' "$tmp/p.log" || fail "contention without --cores-per-node"
    # One core per node for one rank: the overlapped all-reduce time costs its
    # cpu share (0.5 in the file) of compute.
    run "$tmp/pc.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/model.json" --nodes 1,2,4 \
      --algorithm ring --cores-per-node 1
    [ "$rc" -eq 0 ] || fail "bench predict --cores-per-node exited with $rc"
    grep -q "communication has no core of its own, so overlapped all-reduces take 50% of their time from compute" "$tmp/pc.log" ||
      fail "no shared-core line"
    awk -F, '/^[24],[24],ring,/ { n++; step = $4; compute = $5; comm = $6; exposed = $7; c = $11
      want = 0.5 * (comm - exposed); d = step - (compute + exposed + c)
      if (c < want * 0.999 - 1e-12 || c > want * 1.001 + 1e-12 || d > 1e-9 || d < -1e-9) bad++ }
      END { exit (n == 2 && bad == 0) ? 0 : 1 }' "$tmp/pc.log" || fail "contention is not 0.5 x (comm - exposed), or the step does not include it"
    # Strong scaling with a measured compute curve. One in proportion to the
    # batch predicts what no curve does; one with a fixed cost per step (1 ms
    # plus 0.125 ms per sample: 2 ms at batch 8, 1.5 at 4, 1.25 at 2) makes
    # compute at 2 and 4 ranks 0.75 and 0.625 of the profiled one, not 1/2 and
    # 1/4, so the efficiency falls.
    printf '%s\n' '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.0}' '{"model": "mlp:64-32-4", "batch": 2, "step_ms": 0.5}' >"$tmp/prop.jsonl"
    printf '%s\n' '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.0}' '{"model": "mlp:64-32-4", "batch": 4, "step_ms": 1.5}' \
      '{"model": "mlp:64-32-4", "batch": 2, "step_ms": 1.25}' >"$tmp/fixed.jsonl"
    # shellcheck disable=SC2054  # the commas are part of --nodes 1,2,4
    strong=("$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/model.json" --nodes 1,2,4 --algorithm ring --scaling strong)
    run "$tmp/s0.log" "${strong[@]}"
    run "$tmp/s1.log" "${strong[@]}" --compute-curve "$tmp/prop.jsonl" --profile-batch 8
    [ "$rc" -eq 0 ] || fail "bench predict --compute-curve exited with $rc"
    [ "$(grep -E '^[124],' "$tmp/s0.log")" = "$(grep -E '^[124],' "$tmp/s1.log")" ] || fail "a proportional curve changed the prediction"
    run "$tmp/s2.log" "${strong[@]}" --compute-curve "$tmp/fixed.jsonl" --profile-batch 8
    [ "$rc" -eq 0 ] || fail "bench predict with a fixed-cost curve exited with $rc"
    grep -q "^# compute per rank from the curve $tmp/fixed.jsonl (mlp:64-32-4, measured at batch 2,4,8): batch 2 takes 1.250 ms per step against 0.500 ms in proportion" "$tmp/s2.log" ||
      fail "no curve line"
    paste -d, <(grep -E '^[124],' "$tmp/s0.log") <(grep -E '^[124],' "$tmp/s2.log") | awk -F, '
      { c0 = $5; c1 = $16; want = $1 == 1 ? 1 : ($1 == 2 ? 1.5 : 2.5)
        if (c1 < c0 * want * 0.999 || c1 > c0 * want * 1.001 || ($1 > 1 && $20 >= $9)) bad++ }
      END { exit bad ? 1 : 0 }' || fail "compute at 2 and 4 ranks is not 0.75 and 0.625 of the profiled, or efficiency did not fall"
    run "$tmp/s3.log" "${strong[@]}" --compute-curve "$tmp/fixed.jsonl"
    [ "$rc" -ne 0 ] && grep -q "needs --profile-batch" "$tmp/s3.log" || fail "a curve without --profile-batch was accepted"
    # Ranks sharing one machine (weak scaling): 2 at once take 1.5 times as
    # long (the slowest rank's time), 4 at once are not measured. With every
    # node on one machine (--colocation all) compute at 2 nodes is 1.5 times the
    # profiled one, and 4 nodes take the nearest measured count, 2; per node
    # (one rank per node) nothing changes.
    printf '%s\n' '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.0, "ranks_per_host": 1}' \
      '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.1, "step_ms_slowest_rank": 3.0, "ranks_per_host": 2}' >"$tmp/coloc.jsonl"
    # shellcheck disable=SC2054  # the commas are part of --nodes 1,2,4
    weak=("$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/model.json" --nodes 1,2,4 --algorithm ring)
    run "$tmp/w0.log" "${weak[@]}"
    run "$tmp/w1.log" "${weak[@]}" --compute-curve "$tmp/coloc.jsonl" --profile-batch 8
    [ "$rc" -eq 0 ] || fail "bench predict --compute-curve in weak scaling exited with $rc"
    [ "$(grep -E '^[124],' "$tmp/w0.log")" = "$(grep -E '^[124],' "$tmp/w1.log")" ] || fail "one rank per node changed the prediction"
    run "$tmp/w2.log" "${weak[@]}" --compute-curve "$tmp/coloc.jsonl" --profile-batch 8 --colocation all
    [ "$rc" -eq 0 ] || fail "bench predict --colocation all exited with $rc"
    grep -q "^# 2 rank(s) at once on one machine at 2 node(s): batch 8 takes 3.000 ms per step (slowest rank, measured with 2 at once) against 2.000 ms alone (x1.50)" "$tmp/w2.log" ||
      fail "no co-location line for 2 nodes"
    grep -q "^# 4 rank(s) at once on one machine at 4 node(s): batch 8 takes 3.000 ms .*measured with 2 at once" "$tmp/w2.log" ||
      fail "4 nodes did not take the nearest measured count"
    paste -d, <(grep -E '^[124],' "$tmp/w0.log") <(grep -E '^[124],' "$tmp/w2.log") | awk -F, '
      { c0 = $5; c1 = $16; want = $1 == 1 ? 1 : 1.5
        if (c1 < c0 * want * 0.999 || c1 > c0 * want * 1.001) bad++ }
      END { exit bad ? 1 : 0 }' || fail "compute beside others on one machine is not 1.5 times the profiled"
    run "$tmp/w3.log" "${weak[@]}" --compute-curve "$tmp/coloc.jsonl" --profile-batch 8 --colocation some
    [ "$rc" -ne 0 ] && grep -q -- "--colocation" "$tmp/w3.log" || fail "a bad --colocation was accepted"
    printf '%s\n' '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.0}' 'nonsense' >"$tmp/bad.jsonl"
    run "$tmp/s5.log" "${strong[@]}" --compute-curve "$tmp/bad.jsonl" --profile-batch 8
    [ "$rc" -ne 0 ] && grep -q "bad.jsonl line 2: not JSON" "$tmp/s5.log" || fail "a bad curve line was not named"
    printf '%s\n' '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.0}' '{"model": "cnn", "batch": 4, "step_ms": 1.0}' >"$tmp/mixed.jsonl"
    run "$tmp/s6.log" "${strong[@]}" --compute-curve "$tmp/mixed.jsonl" --profile-batch 8
    [ "$rc" -ne 0 ] && grep -q "line 2: model 'cnn', but earlier lines measured 'mlp:64-32-4'" "$tmp/s6.log" || fail "a curve of two models was accepted"
    grep -Eq '^# profile: [0-9]+ step\(s\) of rank 0 .* [0-9]+ bucket\(s\)' "$tmp/p.log" || fail "no profile line"
    grep -Eq '^predicted efficiency at 4 nodes: [0-9]+% \(' "$tmp/p.log" || fail "no verdict line"
    # Two ranks per node need the intra fit, which is poor: refused, then accepted.
    run "$tmp/p2.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/model.json" --nodes 1,2 --ranks-per-node 2
    [ "$rc" -ne 0 ] && grep -q "the intra fit of backend ring is poor .* --allow-poor-fit" "$tmp/p2.log" || fail "a poor fit was not refused"
    run "$tmp/p3.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/model.json" --nodes 1,2 --ranks-per-node 2 --allow-poor-fit
    [ "$rc" -eq 0 ] && grep -q "\[from a fit reported poor\]$" "$tmp/p3.log" || fail "--allow-poor-fit did not mark the verdict"
    run "$tmp/p4.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/model.json" --backend mpi --nodes 2
    [ "$rc" -ne 0 ] && grep -q "no across-nodes (inter) fit for backend mpi" "$tmp/p4.log" || fail "a missing tier was not named"
    run "$tmp/p5.log" "$exe" bench predict --trace "$tmp/none.json" --comm-model "$tmp/model.json"
    [ "$rc" -ne 0 ] && grep -q "none.json: cannot open the file" "$tmp/p5.log" || fail "a missing trace was not named"
    echo "PASS: predictions, verdict, and refusals" ;;
  *) echo "usage: bench_model_test.sh model|predict" >&2; exit 2 ;;
esac
