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
# shellcheck source=tests/support/python.sh
source "$(dirname "${BASH_SOURCE[0]}")/../support/python.sh"  # PYTHON: the tests' one Python
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
    "$PYTHON" - "$tmp/model.json" <<'PY' || fail "the model file is not what bench predict reads"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kind"] == "ringtrain comm model", d
t = d["tiers"]["intra"]
assert t["ranks"] == 2 and t["nodes"] == 1, t
for b in ("ring", "mpi"):
    f = t["backends"][b]
    # The fit clamps both at 0: on a loaded machine the times of small and
    # large sizes can come out flat (scheduling, not bytes), and beta is 0.
    assert f["alpha_s"] >= 0 and f["beta_s_per_byte"] >= 0, f
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
    # --under-load: the sizes again beside a compute thread on each rank, with
    # their fit and the compute the all-reduces cost.
    small_sweep() {  # small_sweep LOG FLAG...: 3 sizes on 2 ranks with FLAG, merged into model.json
      run "$1" mpirun --oversubscribe -np 2 "$exe" bench model --device cpu --backend ring \
        -b 4K -e 64K -n 2 --rounds 2 -w 1 "${@:2}" --json "$tmp/model.json"
      [ "$rc" -eq 0 ] || fail "bench model ${*:2} exited with $rc"
    }
    small_sweep "$tmp/m3.log" --under-load
    grep -Eq "^intra ring under load: alpha [0-9.]+ us per step, beta [0-9.e+-]+ ns/B .*compute beside an all-reduce loses [0-9]+% of its rate" "$tmp/m3.log" ||
      fail "no under-load fit line"
    "$PYTHON" - "$tmp/model.json" <<'PY' || fail "the model file has no under-load fit"
import json, sys
f = json.load(open(sys.argv[1]))["tiers"]["intra"]["backends"]["ring"]
u = f["under_load"]
assert u["alpha_s"] >= 0 and u["beta_s_per_byte"] >= 0 and 0 <= u["compute_loss"] <= 1, u
assert [s["bytes"] for s in u["samples"]] == [4096, 16384, 65536], u
assert all(s["seconds"] > 0 and 0 <= s["compute_loss"] <= 1 for s in u["samples"]), u
PY
    # --after-compute: each size again right after a burst of compute on every
    # rank; the extra time over alone is the tier's arrival wait.
    small_sweep "$tmp/m4.log" --after-compute 0.5
    grep -Eq "^intra ring after compute: the ranks ended their compute [0-9.]+ ms apart .*, the last [0-9.]+ ms after the ranks' mean .* waits [0-9.]+ ms for the last" "$tmp/m4.log" ||
      fail "no after-compute line"
    "$PYTHON" - "$tmp/model.json" <<'PY' || fail "the model file has no after-compute entry"
import json, sys
f = json.load(open(sys.argv[1]))["tiers"]["intra"]["backends"]["ring"]
a = f["after_compute"]
assert a["compute_s"] == 0.5e-3 and a["arrival_wait_s"] >= 0 and a["arrival_spread_s"] >= 0, a
# the last rank's lag behind the mean lies within the spread (latest - earliest)
assert 0 <= a["arrival_lag_s"] <= a["arrival_spread_s"] + 1e-12, a
assert a["compute_mean_rate_s"] > 0, a
assert [s["bytes"] for s in a["samples"]] == [4096, 16384, 65536], a
assert all(s["seconds"] > 0 and s["cycle_s"] > s["seconds"] for s in a["samples"]), a
# the wait: the median over the sizes of each size's wait (cycle - compute at
# the mean rate - alone, timed round by round), never below 0
waits = sorted(s["wait_s"] for s in a["samples"])
assert abs(a["arrival_wait_s"] - max(0.0, waits[1])) < 1e-12, (a, waits)
PY
    run "$tmp/m5.log" mpirun --oversubscribe -np 2 "$exe" bench model --device cpu --backend ring --after-compute -1
    [ "$rc" -ne 0 ] && grep -q -- "--after-compute" "$tmp/m5.log" || fail "a negative --after-compute was not refused by name"
    # --sizes: exactly these sizes (sorted, whole floats, duplicates once), as
    # a study gives a job's smallest bucket and its cap's range.
    run "$tmp/m6.log" mpirun --oversubscribe -np 2 "$exe" bench model --device cpu --backend ring \
      --sizes 64K,20522,16K,64K -n 2 --rounds 2 -w 1 --json "$tmp/sizes.json"
    [ "$rc" -eq 0 ] || fail "bench model --sizes exited with $rc"
    "$PYTHON" - "$tmp/sizes.json" <<'PY' || fail "--sizes did not time exactly the sizes given"
import json, sys
f = json.load(open(sys.argv[1]))["tiers"]["intra"]["backends"]["ring"]
assert [s["bytes"] for s in f["samples"]] == [16384, 20520, 65536], f["samples"]
PY
    for bad in "4K:at least two distinct sizes" "4K,4K:at least two distinct sizes" "4K,,8K:empty entry" \
               "4K,lots:'lots' is not a size" "2,8K:below one float"; do
      run "$tmp/m7.log" mpirun --oversubscribe -np 2 "$exe" bench model --device cpu --backend ring --sizes "${bad%%:*}"
      # Both ranks refuse it alike: said once, naming both.
      [ "$rc" -eq 2 ] && [ "$(grep -c -- "--sizes.*${bad#*:}" "$tmp/m7.log")" -eq 1 ] &&
        grep -q -- "--sizes.*${bad#*:}.*\[the same on ranks 0,1 (all)\]" "$tmp/m7.log" ||
        fail "--sizes ${bad%%:*} was not refused on both ranks with '${bad#*:}'"
    done
    run "$tmp/m8.log" mpirun --oversubscribe -np 2 "$exe" bench model --device cpu --backend ring --sizes 4K,8K -b 4K
    [ "$rc" -ne 0 ] && grep -q -- "--sizes" "$tmp/m8.log" || fail "--sizes with -b was accepted"
    echo "PASS: fits per backend with residuals, a model file, the fit under load and the wait after compute" ;;
  predict)
    "$exe" convert synthetic --force --n 256 --shape 1,8,8 --classes 4 -o "$tmp/d.h5" >/dev/null 2>&1 || fail "convert failed"
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
      # The CSV has 6 significant digits: the sum agrees to about 1e-5 of the step,
      # and comm - exposed, where the two are close, to about 1e-5 of comm (a
      # CI run: 0.000270784 - 0.000270302 read 2.41e-07 against 2.4125e-07).
      want = 0.5 * (comm - exposed); d = step - (compute + exposed + c); tol = 1e-5 * step
      tol_c = 1e-3 * want + 1e-5 * comm + 1e-12
      if (c < want - tol_c || c > want + tol_c || d > tol || d < -tol) bad++ }
      END { exit (n == 2 && bad == 0) ? 0 : 1 }' "$tmp/pc.log" || fail "contention is not 0.5 x (comm - exposed), or the step does not include it"
    # Measured beside compute (an under_load entry): on a shared core the
    # timeline where each slows the other. With the same alpha and beta under
    # load and no compute lost, it is the prediction of free overlap; with
    # all-reduces twice as slow and compute at half its rate beside them, every
    # multi-node step is slower, and the CSV adds up.
    "$PYTHON" - "$tmp/model.json" "$tmp/same.json" "$tmp/slow.json" <<'PY' || fail "could not write the under-load models"
import json, sys
d = json.load(open(sys.argv[1]))
ring = d["tiers"]["inter"]["backends"]["ring"]
ring["under_load"] = {"alpha_s": ring["alpha_s"], "beta_s_per_byte": ring["beta_s_per_byte"], "compute_loss": 0.0}
json.dump(d, open(sys.argv[2], "w"))
ring["under_load"] = {"alpha_s": 2 * ring["alpha_s"], "beta_s_per_byte": 2 * ring["beta_s_per_byte"], "compute_loss": 0.5}
json.dump(d, open(sys.argv[3], "w"))
PY
    # shellcheck disable=SC2054  # the commas are part of --nodes 1,2,4
    shared=("$exe" bench predict --trace "$tmp/t.json" --nodes 1,2,4 --algorithm ring --cores-per-node 1)
    run "$tmp/u0.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/model.json" --nodes 1,2,4 --algorithm ring
    run "$tmp/u1.log" "${shared[@]}" --comm-model "$tmp/same.json"
    [ "$rc" -eq 0 ] || fail "bench predict with an under-load fit exited with $rc"
    grep -q "communication shares the core it computes on; measured beside compute, a .* MiB all-reduce at 4 node(s) takes .* and compute loses 0% of its rate" "$tmp/u1.log" ||
      fail "no under-load line"
    paste -d, <(grep -E '^[124],' "$tmp/u0.log") <(grep -E '^[124],' "$tmp/u1.log") | awk -F, '
      # Two timelines, printed to 6 significant digits: equal to 1e-5 relative.
      { for (i = 4; i <= 11; i++) { d = $i - $(i + 11); t = 1e-5 * ($i < 0 ? -$i : $i) + 1e-12
          if (d > t || d < -t) bad++ } }
      END { exit bad ? 1 : 0 }' || fail "unslowed under-load fits did not predict free overlap"
    run "$tmp/u2.log" "${shared[@]}" --comm-model "$tmp/slow.json"
    [ "$rc" -eq 0 ] || fail "bench predict with a slow under-load fit exited with $rc"
    paste -d, <(grep -E '^[124],' "$tmp/u1.log") <(grep -E '^[124],' "$tmp/u2.log") | awk -F, '
      $1 > 1 { n++; step = $15; compute = $16; exposed = $18; c = $22
        d = step - (compute + exposed + c); tol = 1e-5 * step  # 6 significant digits in the CSV
        if (step <= $4 || c <= 0 || d > tol || d < -tol) bad++ }
      END { exit (n == 2 && !bad) ? 0 : 1 }' || fail "slowed both ways, the steps are not slower, or do not add up"
    # Inter fits measured on several node counts: each prediction takes the one
    # of its node count, or the nearest below. "2" is the plain inter fit, "4"
    # twice as slow per byte: 2 and 3 nodes predict as before, 4 and 8 slower.
    "$PYTHON" - "$tmp/model.json" "$tmp/bynodes.json" <<'PY' || fail "could not write the by-nodes model"
import copy, json, sys
d = json.load(open(sys.argv[1]))
inter = d["tiers"]["inter"]
slow = copy.deepcopy(inter)
slow["backends"]["ring"]["beta_s_per_byte"] *= 2
d["tiers"]["inter_by_nodes"] = {"2": inter, "4": slow}
json.dump(d, open(sys.argv[2], "w"))
PY
    run "$tmp/n0.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/model.json" --nodes 1,2,3,4,8 --algorithm ring
    run "$tmp/n1.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/bynodes.json" --nodes 1,2,3,4,8 --algorithm ring
    [ "$rc" -eq 0 ] || fail "bench predict with fits by node count exited with $rc"
    grep -q "^# across nodes, fits measured on several node counts: 2 node(s) from the fit on 2, 3 node(s) from the fit on 2, 4 node(s) from the fit on 4, 8 node(s) from the fit on 4$" "$tmp/n1.log" ||
      fail "the fits by node count were not chosen as the nearest below"
    paste -d, <(grep -E '^[0-9]+,' "$tmp/n0.log") <(grep -E '^[0-9]+,' "$tmp/n1.log") | awk -F, '
      $1 <= 3 && $6 != $17 { bad++ } $1 >= 4 && $17 <= $6 { bad++ } END { exit bad ? 1 : 0 }' ||
      fail "2 and 3 nodes did not keep the plain fit, or 4 and 8 did not take the slower one"
    # A wait for the last rank measured after compute (an after_compute entry):
    # every multi-node step exposes 2 ms more, and says so per node count.
    "$PYTHON" - "$tmp/model.json" "$tmp/wait.json" <<'PY' || fail "could not write the model with a wait"
import json, sys
d = json.load(open(sys.argv[1]))
d["tiers"]["inter"]["backends"]["ring"]["after_compute"] = {"compute_s": 0.003, "arrival_wait_s": 0.002, "arrival_spread_s": 0.004, "samples": []}
json.dump(d, open(sys.argv[2], "w"))
PY
    run "$tmp/w1.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/wait.json" --nodes 1,2,4 --algorithm ring
    [ "$rc" -eq 0 ] || fail "bench predict with an arrival wait exited with $rc"
    grep -q "^# 4 node(s): ranks end their compute apart, and the step's last all-reduce waits 2.000 ms for the last of them" "$tmp/w1.log" ||
      fail "no line for the arrival wait"
    # With two algorithms the line is said once per node count, not per algorithm.
    # shellcheck disable=SC2054  # the commas are part of the lists
    run "$tmp/w2.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/wait.json" --nodes 1,2,4 --algorithm ring,hierarchical
    [ "$rc" -eq 0 ] || fail "bench predict with an arrival wait and two algorithms exited with $rc"
    [ "$(grep -c "^# 4 node(s): ranks end their compute apart" "$tmp/w2.log")" -eq 1 ] ||
      fail "the arrival wait at 4 nodes is not said exactly once with two algorithms"
    # A lag measured beside the wait: the lag is said (and used), not the wait.
    "$PYTHON" - "$tmp/wait.json" "$tmp/lag.json" <<'PY' || fail "could not write the model with a lag"
import json, sys
d = json.load(open(sys.argv[1]))
d["tiers"]["inter"]["backends"]["ring"]["after_compute"]["arrival_lag_s"] = 0.003
json.dump(d, open(sys.argv[2], "w"))
PY
    run "$tmp/l1.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/lag.json" --nodes 1,2,4 --algorithm ring
    [ "$rc" -eq 0 ] || fail "bench predict with an arrival lag exited with $rc"
    grep -q "^# 4 node(s): ranks end their compute apart, the last 3.000 ms after the ranks' mean, so each bucket's all-reduce starts that late" "$tmp/l1.log" ||
      fail "no line for the arrival lag"
    ! grep -q "waits 2.000 ms" "$tmp/l1.log" || fail "the wait was said beside a measured lag"
    paste -d, <(grep -E '^[124],' "$tmp/u0.log") <(grep -E '^[124],' "$tmp/w1.log") | awk -F, '
      { n++; d_step = $15 - $4; d_exp = $18 - $7; tol = 1e-5 * $15
        if ($1 == 1 && (d_step != 0 || d_exp != 0)) bad++
        if ($1 > 1 && (d_step < 0.002 - tol || d_step > 0.002 + tol || d_exp < 0.002 - tol || d_exp > 0.002 + tol)) bad++ }
      END { exit (n == 3 && !bad) ? 0 : 1 }' || fail "the wait did not add 2 ms to the exposed time and the step of every multi-node point"
    # Samples in the model file price the ring steps between their sizes (the
    # default): measured at twice the fit's line, from a step of 1 byte to
    # 1 MB, every bucket's all-reduce takes twice as long at 2 and 4 nodes;
    # --pricing fit keeps the line. A file without samples says so.
    "$PYTHON" - "$tmp/model.json" "$tmp/samples.json" <<'PY' || fail "could not write the model with samples"
import json, sys
d = json.load(open(sys.argv[1]))
ring = d["tiers"]["inter"]["backends"]["ring"]
a, b = ring["alpha_s"], ring["beta_s_per_byte"]
ring["samples"] = [{"bytes": n, "seconds": 2 * 2 * (a + n / 2 * b)} for n in (2, 2e3, 2e6)]
json.dump(d, open(sys.argv[2], "w"))
PY
    # shellcheck disable=SC2054  # the commas are part of --nodes 1,2,4
    priced=("$exe" bench predict --trace "$tmp/t.json" --nodes 1,2,4 --algorithm ring)
    run "$tmp/c0.log" "${priced[@]}" --comm-model "$tmp/model.json"
    run "$tmp/c1.log" "${priced[@]}" --comm-model "$tmp/samples.json"
    [ "$rc" -eq 0 ] || fail "bench predict with samples exited with $rc"
    grep -q "^# all-reduce times: each ring step priced from the measured sizes around its chunk" "$tmp/c1.log" ||
      fail "no line for the measured pricing"
    grep -q "^# all-reduce times: from the fit's alpha and beta (the model file keeps no samples)" "$tmp/c0.log" ||
      fail "no line for a model file without samples"
    paste -d, <(grep -E '^[124],' "$tmp/c0.log") <(grep -E '^[124],' "$tmp/c1.log") | awk -F, '
      { n++; r = $6 > 0 ? $17 / $6 : 0 }
      $1 == 1 && $17 != 0 { bad++ }
      $1 > 1 && (r < 2 - 1e-4 || r > 2 + 1e-4) { bad++ }
      END { exit (n == 3 && !bad) ? 0 : 1 }' || fail "steps measured at twice the line did not double every all-reduce"
    run "$tmp/c2.log" "${priced[@]}" --comm-model "$tmp/samples.json" --pricing fit
    [ "$rc" -eq 0 ] || fail "bench predict --pricing fit exited with $rc"
    [ "$(grep -E '^[124],' "$tmp/c0.log")" = "$(grep -E '^[124],' "$tmp/c2.log")" ] || fail "--pricing fit did not price by the fit"
    grep -q "^# all-reduce times: from the fit's alpha and beta$" "$tmp/c2.log" || fail "no line for --pricing fit"
    run "$tmp/c3.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/samples.json" --pricing line
    [ "$rc" -ne 0 ] && grep -q -- "--pricing" "$tmp/c3.log" || fail "--pricing line was accepted"
    # A sample that is not a time, or not there, is named with the file.
    "$PYTHON" - "$tmp/samples.json" "$tmp/badsample.json" "$tmp/nosecs.json" <<'PY' || fail "could not write the bad sample models"
import json, sys
d = json.load(open(sys.argv[1]))
samples = d["tiers"]["inter"]["backends"]["ring"]["samples"]
samples[1]["seconds"] = -1e-3
json.dump(d, open(sys.argv[2], "w"))
del samples[1]["seconds"]
json.dump(d, open(sys.argv[3], "w"))
PY
    for bad in badsample nosecs; do
      run "$tmp/$bad.log" "$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/$bad.json" --nodes 1,2
      [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -q "comm model $tmp/$bad.json: " "$tmp/$bad.log" ||
        fail "a model file with a bad sample ($bad) was not refused with its name"
    done
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
        # The step (6 significant digits), not the efficiency (4 decimals, which
        # can round a communication-bound case to the same figure), must grow.
        if (c1 < c0 * want * 0.999 || c1 > c0 * want * 1.001 || ($1 > 1 && $15 <= $4)) bad++ }
      END { exit bad ? 1 : 0 }' || fail "compute at 2 and 4 ranks is not 0.75 and 0.625 of the profiled, or the step did not grow"
    run "$tmp/s3.log" "${strong[@]}" --compute-curve "$tmp/fixed.jsonl"
    [ "$rc" -ne 0 ] && grep -q "needs --profile-batch" "$tmp/s3.log" || fail "a curve without --profile-batch was accepted"
    # Ranks sharing one machine (weak scaling): 2 at once take 1.5 times as
    # long (a synchronous step of them, not the slowest rank's 1.75), 4 at
    # once are not measured. With every
    # node on one machine (--colocation all) compute at 2 nodes is 1.5 times the
    # profiled one, and 4 nodes take the nearest measured count, 2; per node
    # (one rank per node) nothing changes.
    printf '%s\n' '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.0, "ranks_per_host": 1}' \
      '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.1, "step_ms_slowest_rank": 3.5, "step_ms_synchronous": 3.0, "ranks_per_host": 2}' >"$tmp/coloc.jsonl"
    # shellcheck disable=SC2054  # the commas are part of --nodes 1,2,4
    weak=("$exe" bench predict --trace "$tmp/t.json" --comm-model "$tmp/model.json" --nodes 1,2,4 --algorithm ring)
    run "$tmp/w0.log" "${weak[@]}"
    run "$tmp/w1.log" "${weak[@]}" --compute-curve "$tmp/coloc.jsonl" --profile-batch 8
    [ "$rc" -eq 0 ] || fail "bench predict --compute-curve in weak scaling exited with $rc"
    [ "$(grep -E '^[124],' "$tmp/w0.log")" = "$(grep -E '^[124],' "$tmp/w1.log")" ] || fail "one rank per node changed the prediction"
    run "$tmp/w2.log" "${weak[@]}" --compute-curve "$tmp/coloc.jsonl" --profile-batch 8 --colocation all
    [ "$rc" -eq 0 ] || fail "bench predict --colocation all exited with $rc"
    grep -q "^# 2 rank(s) at once on one machine at 2 node(s): batch 8 takes 3.000 ms per step (a synchronous step, measured with 2 at once) against 2.000 ms alone (x1.50)" "$tmp/w2.log" ||
      fail "no co-location line for 2 nodes"
    grep -q "^# 4 rank(s) at once on one machine at 4 node(s): batch 8 takes 3.000 ms .*measured with 2 at once" "$tmp/w2.log" ||
      fail "4 nodes did not take the nearest measured count"
    paste -d, <(grep -E '^[124],' "$tmp/w0.log") <(grep -E '^[124],' "$tmp/w2.log") | awk -F, '
      { c0 = $5; c1 = $16; want = $1 == 1 ? 1 : 1.5
        if (c1 < c0 * want * 0.999 || c1 > c0 * want * 1.001) bad++ }
      END { exit bad ? 1 : 0 }' || fail "compute beside others on one machine is not 1.5 times the profiled"
    # Timed side by side (bench step --side-by-side): the slowdown paired with
    # one rank alone, x1.1, replaces 3.0 / 2.0 from two separate runs.
    printf '%s\n' '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.0, "ranks_per_host": 1}' \
      '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.1, "step_ms_synchronous": 3.0, "ranks_per_host": 2, "slowdown_beside": 1.1}' >"$tmp/paired.jsonl"
    run "$tmp/w4.log" "${weak[@]}" --compute-curve "$tmp/paired.jsonl" --profile-batch 8 --colocation all
    [ "$rc" -eq 0 ] || fail "bench predict with a side-by-side slowdown exited with $rc"
    grep -q "^# 2 rank(s) at once on one machine at 2 node(s): batch 8 takes 2.200 ms per step (a synchronous step, measured with 2 at once, side by side with one rank alone) against 2.000 ms alone (x1.10)" "$tmp/w4.log" ||
      fail "the side-by-side slowdown was not used"
    paste -d, <(grep -E '^[124],' "$tmp/w0.log") <(grep -E '^[124],' "$tmp/w4.log") | awk -F, '
      { c0 = $5; c1 = $16; want = $1 == 1 ? 1 : 1.1
        if (c1 < c0 * want * 0.999 || c1 > c0 * want * 1.001) bad++ }
      END { exit bad ? 1 : 0 }' || fail "compute beside others is not 1.1 times the profiled with the side-by-side slowdown"
    printf '%s\n' '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.0, "ranks_per_host": 1}' \
      '{"model": "mlp:64-32-4", "batch": 8, "step_ms": 2.1, "ranks_per_host": 2, "slowdown_beside": "fast"}' >"$tmp/badpair.jsonl"
    run "$tmp/w5.log" "${weak[@]}" --compute-curve "$tmp/badpair.jsonl" --profile-batch 8 --colocation all
    [ "$rc" -ne 0 ] && grep -q "badpair.jsonl line 2: 'slowdown_beside' is not a positive number" "$tmp/w5.log" || fail "a bad slowdown_beside was accepted"
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
