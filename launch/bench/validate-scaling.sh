#!/usr/bin/env bash
# validate-scaling.sh: the README's validation of the step model, in one
# command. Runs launch/scaling-study.sh on shaped namespace nodes for every
# case (nodes x link rate x model x weak/strong scaling), then writes the table
# of measured against predicted efficiency at the largest node count.
set -euo pipefail

prog=validate-scaling.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=launch/env.sh
source "$here/../env.sh"  # RINGTRAIN_PYTHON
study=$here/../scaling-study.sh

die() { echo "$prog: error: $*" >&2; exit 2; }
say() { echo "$prog: $*" >&2; }

usage() {
  cat <<EOF
Usage: sudo $prog -o DIR [options]

Runs one scaling study (launch/scaling-study.sh --netns-nodes K --link-rate R
--predict ...) per case and writes DIR/validation.md: for each case, the
measured scaling efficiency at K nodes (median of the repeats, min-max), the
step model's prediction for ring all-reduce at K nodes, the relative error,
whether it is within 10%, the efficiency from the runs' means, the measured
wait for the last rank after compute and its lag behind the ranks' mean (ms),
and the study's noise warnings.
Needs root (namespace nodes) and a built ringtrain. All 16 default cases take
about 40 minutes on a 2-core machine (5 repeats, each round measuring its own
comm model).

The cases (each list comma-separated):
  --nodes LIST       namespace nodes, one rank each (default 2,3); a study runs
                     np = 1..K and predicts 1,...,K,4,8
  --links LIST       tc rates of each node's link (default 1gbit,10gbit)
  --models LIST      mlp (mlp:784-512-512-10, batch 64, 60 steps; strong scaling
                     at global batch 192) and cnn (batch 32, 30 steps; global
                     batch 96) (default mlp,cnn)
  --scalings LIST    weak (per-rank batch fixed) and strong (--global-batch)
                     (default weak,strong)
Runs:
  --data FILE        training set (default: DIR/d.h5, made once with 'ringtrain
                     convert synthetic --n 4096 --test-n 128 --shape 1,28,28
                     --classes 10 --seed 7')
  --repeats R        runs per rank count in each study (default 5: with
                     delayed ACKs, runs of 3 ranks on 2 cores fall into a fast
                     and a slow mode, about one in six slow, and with 3
                     repeats two slow ones set the median)
  --delayed-acks     keep the kernel's delayed TCP ACKs on the nodes (by default
                     they ACK at once: with delayed ACKs an all-reduce of 3
                     ranks on 2 cores runs at one of two speeds per job; rounds
                     before AL ran so)
  --exe PATH         ringtrain binary (default \$RINGTRAIN_EXE, else
                     \${BUILD_DIR:-<repo>/build}/ringtrain)
  --dry-run          print the study commands and run nothing
  --table-only       run nothing; write the table from the studies already in DIR
Output (DIR): validation.md, and per case <case>/ (the study's CSV, plot, runs,
comm model, compute curve) and <case>.log (what the study printed), where
<case> is e.g. n2-cnn-1gbit-weak. A study that fails is named in the table and
makes the exit status 1; the other cases still run.
  -h, --help         this text
EOF
}

out=""
nodes_list=2,3
links_list=1gbit,10gbit
models_list=mlp,cnn
scalings_list=weak,strong
data=""
repeats=5
exe=${RINGTRAIN_EXE:-${BUILD_DIR:-$here/../../build}/ringtrain}
dry_run=0
table_only=0
delayed_acks=0

need_value() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"; }
while [ $# -gt 0 ]; do
  case $1 in
    -o|--out) need_value "$@"; out=$2; shift 2 ;;
    --nodes) need_value "$@"; nodes_list=$2; shift 2 ;;
    --links) need_value "$@"; links_list=$2; shift 2 ;;
    --models) need_value "$@"; models_list=$2; shift 2 ;;
    --scalings) need_value "$@"; scalings_list=$2; shift 2 ;;
    --data) need_value "$@"; data=$2; shift 2 ;;
    --repeats) need_value "$@"; repeats=$2; shift 2 ;;
    --exe) need_value "$@"; exe=$2; shift 2 ;;
    --dry-run) dry_run=1; shift ;;
    --delayed-acks) delayed_acks=1; shift ;;
    --table-only) table_only=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

[ -n "$out" ] || die "-o DIR is required (where the studies and the table go)"
IFS=, read -r -a nodes <<<"$nodes_list"
IFS=, read -r -a links <<<"$links_list"
IFS=, read -r -a models <<<"$models_list"
IFS=, read -r -a scalings <<<"$scalings_list"
for k in "${nodes[@]}"; do
  [[ $k =~ ^[0-9]+$ ]] && [ "$k" -ge 2 ] || die "--nodes: a study needs 2 or more nodes, got '$k' in '$nodes_list'"
done
for m in "${models[@]}"; do
  case $m in mlp|cnn) ;; *) die "--models: mlp or cnn, got '$m' in '$models_list'" ;; esac
done
for s in "${scalings[@]}"; do
  case $s in weak|strong) ;; *) die "--scalings: weak or strong, got '$s' in '$scalings_list'" ;; esac
done
for r in "${links[@]}"; do
  [[ $r =~ ^[0-9.]+[kmgt]?bit$ ]] || die "--links: a tc rate such as 1gbit or 500mbit, got '$r' in '$links_list'"
done
[[ $repeats =~ ^[0-9]+$ ]] && [ "$repeats" -ge 1 ] || die "--repeats must be a positive whole number, got '$repeats'"
[ "$dry_run" -eq 0 ] || [ "$table_only" -eq 0 ] || die "--dry-run and --table-only exclude each other"
command -v "$RINGTRAIN_PYTHON" >/dev/null || die "$RINGTRAIN_PYTHON (Python 3) is needed to write the table"

case_name() { echo "n$1-$2-$3-$4"; }

# study_command K MODEL RATE SCALING: the scaling-study.sh command of one case.
study_command() {
  local k=$1 model=$2 rate=$3 scaling=$4 np predict steps batch gb model_flag
  np=$(seq -s, 1 "$k")
  predict=$np; [ "$k" -ge 4 ] || predict+=,4; predict+=,8
  case $model in
    mlp) model_flag=mlp:784-512-512-10 steps=60 batch=64 gb=192 ;;
    cnn) model_flag=cnn steps=30 batch=32 gb=96 ;;
  esac
  cmd=("$study" --netns-nodes "$k" --link-rate "$rate" --np "$np" --repeats "$repeats" --steps "$steps"
       --predict "$predict" --allow-poor-fit --exe "$exe" -o "$out/$(case_name "$k" "$model" "$rate" "$scaling")")
  [ "$scaling" = weak ] || cmd+=(--global-batch "$gb")
  [ "$delayed_acks" -eq 0 ] || cmd+=(--delayed-acks)
  cmd+=(-- --data "$data" --model "$model_flag" --backend ring)
  [ "$scaling" = strong ] || cmd+=(--batch "$batch")
}

failed=0
if [ "$table_only" -eq 0 ]; then
  [ "$dry_run" -eq 1 ] || [ "$(id -u)" -eq 0 ] || die "namespace nodes need root: run with sudo (or --dry-run to see the commands)"
  [ "$dry_run" -eq 1 ] || [ -x "$exe" ] || die "ringtrain binary '$exe' is not an executable (build it, or give --exe / RINGTRAIN_EXE)"
  [ "$dry_run" -eq 1 ] || mkdir -p "$out"
  if [ -z "$data" ]; then
    data=$out/d.h5
    if [ "$dry_run" -eq 0 ] && [ ! -s "$data" ]; then
      "$exe" convert synthetic --force --n 4096 --test-n 128 --shape 1,28,28 --classes 10 --seed 7 -o "$data" \
        >"$out/convert.log" 2>&1 || { cat "$out/convert.log" >&2; die "could not write the data set $data"; }
    fi
  elif [ "$dry_run" -eq 0 ]; then
    [ -f "$data" ] || die "--data '$data' does not exist"
  fi
  total=$((${#nodes[@]} * ${#links[@]} * ${#models[@]} * ${#scalings[@]}))
  i=0
  for k in "${nodes[@]}"; do
    for rate in "${links[@]}"; do
      for model in "${models[@]}"; do
        for scaling in "${scalings[@]}"; do
          i=$((i + 1))
          study_command "$k" "$model" "$rate" "$scaling"
          if [ "$dry_run" -eq 1 ]; then printf '%q ' "${cmd[@]}"; echo; continue; fi
          name=$(case_name "$k" "$model" "$rate" "$scaling")
          say "[$i/$total] $name"
          rm -rf "${out:?}/$name"
          if ! "${cmd[@]}" >"$out/$name.log" 2>&1; then
            failed=1
            say "$name failed (log: $out/$name.log)"
            tail -n 5 "$out/$name.log" | sed 's/^/  | /' >&2
          fi
        done
      done
    done
  done
  [ "$dry_run" -eq 0 ] || exit 0
fi

# The table, from each case's scaling.csv, runs.csv, comm-model.json and log.
[ -d "$out" ] || die "no directory $out: run the studies first (without --table-only)"
"$RINGTRAIN_PYTHON" - "$out" "$nodes_list" "$links_list" "$models_list" "$scalings_list" >"$out/validation.md" <<'PY' || failed=1
import csv, json, os, re, statistics, sys

out, nodes, links, models, scalings = sys.argv[1], *[a.split(",") for a in sys.argv[2:6]]

def rate_label(r):
    m = re.fullmatch(r"([0-9.]+)([kmgt]?)bit", r)
    unit = {"": "bit/s", "k": "kbit/s", "m": "Mbit/s", "g": "Gbit/s", "t": "Tbit/s"}[m.group(2)]
    return f"{m.group(1)} {unit}"

def noise_of(log):
    found = []
    for line in log:
        if m := re.search(r"the \d+ repeats at np=(\d+) spread", line):
            found.append(f"repeats np={m.group(1)}")
        elif m := re.search(r"rounds of compute at batch (\d+) alone", line):
            found.append(f"compute b{m.group(1)}x1")
        elif m := re.search(r"rounds of the slowdown at batch (\d+) with (\d+) rank", line):
            found.append(f"slowdown b{m.group(1)}x{m.group(2)}")
        elif re.search(r"rounds' predictions spread", line):
            found.append("predictions")
    return ", ".join(found) or "-"

def row(k, model, rate, scaling):
    name = f"n{k}-{model}-{rate}-{scaling}"
    d = os.path.join(out, name)
    head = f"| {k} | {model} | {rate_label(rate)} | {scaling} |"
    try:
        with open(os.path.join(d, "scaling.csv")) as f:
            rows = list(csv.DictReader(f))
        meas = [r for r in rows if r["source"] == "measured" and int(r["np"]) == int(k)]
        pred = [r for r in rows if r["source"] == "predicted-ring" and int(r["nodes"]) == int(k)]
        if not meas or not pred:
            raise ValueError("no measured or no predicted-ring row at this node count")
        e, lo, hi = (float(meas[0][c]) for c in ("scaling_efficiency", "efficiency_min", "efficiency_max"))
        p = float(pred[0]["scaling_efficiency"])
        err = e / p - 1
        with open(os.path.join(d, "runs.csv")) as f:
            runs = list(csv.DictReader(f))
        def mean_rate(n):
            return statistics.median(float(r["samples_per_s_mean"]) for r in runs if int(r["np"]) == n)
        e_mean = mean_rate(int(k)) / (int(k) * mean_rate(1))
        with open(os.path.join(d, "comm-model.json")) as f:
            tier = json.load(f)["tiers"]["inter"]["backends"]["ring"]
        after = tier.get("after_compute", {})
        wait, lag = (("-" if after.get(k) is None else f"{1e3 * after[k]:.1f}")
                     for k in ("arrival_wait_s", "arrival_lag_s"))
        with open(os.path.join(out, name + ".log")) as f:
            noise = noise_of(f)
    except (OSError, ValueError, KeyError, statistics.StatisticsError, ZeroDivisionError) as x:
        return f"{head} failed: {x} | | | | | | | |", None
    within = abs(err) <= 0.10
    return (f"{head} {e:.3f} ({lo:.3f}-{hi:.3f}) | {p:.3f} | {100 * err:+.1f}% | {'yes' if within else 'no'} "
            f"| {e_mean:.3f} ({100 * (e_mean / p - 1):+.1f}%) | {wait} | {lag} | {noise} |",
            (within, abs(e_mean / p - 1) <= 0.10))

print("| nodes | model | link | scaling | measured (min-max) | predicted | error | within 10% | mean (error) | wait (ms) | lag (ms) | noise |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
results = []
for k in nodes:
    for rate in links:
        for model in models:
            for scaling in scalings:
                line, res = row(k, model, rate, scaling)
                print(line)
                results.append(res)
done = [r for r in results if r]
print()
print(f"{sum(r[0] for r in done)} of {len(results)} within 10% by the median step, "
      f"{sum(r[1] for r in done)} by the means"
      + (f"; {len(results) - len(done)} case(s) without a result" if len(done) < len(results) else "") + ".")
sys.exit(0 if len(done) == len(results) else 1)
PY
cat "$out/validation.md"
say "wrote $out/validation.md"
exit "$failed"
