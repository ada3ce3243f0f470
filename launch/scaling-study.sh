#!/usr/bin/env bash
# scaling-study.sh: one training config at a series of rank counts, measured
# the same way each time, as a CSV and a plot. Every run trains a fixed number
# of steps from scratch and reads its own metrics.jsonl; the first logged
# window is warm-up (allocation, first touch of the data, connection set-up)
# and is left out. Throughput over a run is total samples over total time of
# the measured windows, not a mean of per-window rates, so a slow window
# weighs as much as it cost. Each point runs --repeats times (median, min,
# max); --predict adds the step model's points (ringtrain bench predict) from
# the trace of the base point's median run and a measured communication model.
set -euo pipefail

prog=scaling-study.sh
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

die() { echo "$prog: error: $*" >&2; exit 2; }
say() { echo "$prog: $*" >&2; }

usage() {
  cat <<EOF
Usage: $prog [options] -o DIR -- RINGTRAIN-TRAIN-FLAGS...

Runs 'ringtrain train' with the given flags at np = 1, 2, ... ranks, each for a
fixed number of steps, and writes DIR/scaling.csv and DIR/scaling.png:
  $prog --max-np 4 --steps 200 -o study -- --data d.h5 --model mlp:784-512-512-10 --batch 64
  $prog --np 8,16,32 --machinefile hosts --gpus-per-node 8 -o study -- --data d.h5 --model cnn
  sudo $prog --netns-nodes 2 --max-np 4 -o study -- --data d.h5 --model cnn
  sudo $prog --netns-nodes 3 --link-rate 1gbit --np 1,2,3 --predict 1,2,3,4,8,16 -o study -- ...

Where the ranks run (pick one; default: this machine, plain mpirun):
  --machinefile FILE    launch/ringtrain-mpirun with this machinefile: a real cluster
  --gpus-per-node G     with --machinefile: GPU nodes, G ranks per node
  --netns-nodes K       launch/netns-cluster with K namespace "nodes" on this machine
                        (needs root); a run of np ranks uses min(K, np) nodes with
                        ceil(np / nodes) slots each, so ranks spread across nodes
  --link-rate RATE      with --netns-nodes: shape each node's link (e.g. 1gbit, 10gbit;
  --link-delay DELAY    and e.g. 100us one way), see launch/netns-cluster
  --delayed-acks        with --netns-nodes: keep the kernel's delayed TCP ACKs (the
                        nodes ACK at once by default, see launch/netns-cluster)
Rank counts and batch:
  --max-np N            np = 1, 2, ..., N (default 4)
  --np LIST             explicit rank counts, e.g. 1,2,4,8 (overrides --max-np)
  --global-batch G      strong scaling: the same global batch G at every np, i.e.
                        --batch G / (np x accum) per rank (G must divide evenly;
                        --batch may not be given then). Without it, the training
                        flags' --batch is per rank and the global batch grows with
                        np (weak scaling)
Runs:
  --steps S             optimizer steps per run (default 100, at least 2); the
                        progress window is S/5 steps and the first one is warm-up
  --run-timeout T       end a run that takes longer than T seconds, and the study
                        with it (default 0: no limit beyond ringtrain's --timeout)
  --repeats R           run each rank count R times (default 3): the CSV has the
                        median, min and max, and the plot draws the spread; a
                        spread over 15% of the median is warned about (a noisy
                        machine: the medians are not to be trusted)
  --oversubscribe       allow more ranks than cores or slots (ranks then unbound)
  --exe PATH            ringtrain binary (default \$RINGTRAIN_EXE, else
                        \${BUILD_DIR:-<repo>/build}/ringtrain)
Prediction (the step model; see docs/scaling.md):
  --predict LIST        node counts to predict, e.g. 1,2,4,8,16,32,64,128,256: adds
                        predicted rows (ring and hierarchical all-reduce) to the CSV
                        and dashed lines to the plot, and a verdict line at the end.
                        It first times one step ('ringtrain bench step', the data
                        set's shape; DIR/compute-curve.jsonl) at each per-rank batch
                        it needs, one rank alone (with --global-batch a small batch
                        is slower per sample, so compute does not shrink in
                        proportion), and, where the ranks share this machine
                        (--netns-nodes, a plain mpirun), with as many ranks at once
                        as each measured point (a synchronous step of them: the
                        slowest rank's time, or with more ranks than cores their
                        mean rate's): ranks on one machine share its cores and
                        memory, so each computes slower (bench predict
                        --colocation all; a predicted count above the largest
                        measured takes the largest's slowdown). That slowdown is
                        timed side by side (bench step --side-by-side: rounds of
                        one rank alone, then all at once), as the machine's
                        speed drifts between separate runs
  --comm-model FILE     alpha/beta fits of 'ringtrain bench model --json'; without
                        it the study measures them in every repeat round, right
                        after that round's runs (--netns-nodes: across the nodes,
                        one rank each, on the same shaped links; and inside a node
                        when it has several ranks), into DIR/rounds/r<k>/; where
                        the ranks share this machine, also beside compute
                        (--under-load) and right after a step's compute
                        (--after-compute: ranks sharing cores end it apart, and the
                        exposed all-reduce waits for the last). Each round's model
                        gives a prediction; the study keeps the median round's
                        (its model in DIR/comm-model.json) and warns when the
                        rounds' predictions spread over 15% of their median: a
                        link's measured speed drifts over minutes on a shared
                        machine, as the runs' does
  --predict-backend B   whose fits to use: shm (hierarchical all-reduce) or ring, mpi,
                        nccl (ring); default the training flags' --backend, else shm
  --ranks-per-node G    ranks per predicted node (default: those of the largest run)
  --cores-per-node C    cores of a predicted node: with G >= C a rank's communication
                        shares the core it computes on, and the prediction charges
                        the all-reduce's measured CPU share to compute (default: this
                        machine's cores over the nodes it hosts with --netns-nodes or
                        without --machinefile; unset on a --machinefile cluster, where
                        communication is assumed to have a core of its own)
  --allow-poor-fit      predict even from fits 'bench model' reports poor (their
                        largest residual over 25%); the verdict then says so
Output:
  -o, --out DIR         output directory (created): scaling.csv, scaling.png,
                        scaling.gp (the gnuplot script) and runs/np<N>/r<k>/ (each
                        run's output.log, metrics.jsonl, trace.json and TensorBoard
                        events); with --predict also predicted.csv, verdict.txt,
                        compute-curve.jsonl, comm-model.json and rounds/r<k>/
                        (each round's comm model, bench predict log and CSV)
  -h, --help            this text

What is timed: only the training steps. Start-up (MPI launch, data set open,
model build, connection set-up) happens before the first step and is outside
every window; the first logged window (S/5 steps: first touch of the data,
allocations, the first all-reduces) is warm-up and is dropped. A run's
samples/s is its global batch over its median step after warm-up (ringtrain's
summary, step_s_median): the typical step, which a slow spell of a shared
machine does not move, and what the step model predicts (it is built from
median phase times). The mean, samples over the time of the later windows,
is in DIR/runs.csv beside it; on a quiet machine the two agree.

The flags after '--' go to every 'ringtrain train' run unchanged, except that
the study sets --max-steps S --epochs 1000000 --check-every 0 --log-every S/5
--logdir DIR/runs/np<N> itself (so those flags may not be given), and --batch
with --global-batch.

CSV columns: np, nodes, global_batch, samples_per_s, scaling_efficiency,
exposed_comm_share, samples_per_s_min, samples_per_s_max, efficiency_min,
efficiency_max, repeats, source.
  samples_per_s       global batch / the run's median step time; the median
                      over the repeats (min and max beside it)
  scaling_efficiency  samples_per_s / (np x the 1-rank samples_per_s); when np=1
                      is not in the list, relative to the smallest np per rank
                      (its median); min and max are each repeat's against it
  exposed_comm_share  the part of the step spent waiting on the all-reduce after
                      backward (exposed_comm_s / step_s), 0 = fully hidden (median)
  source              measured, or predicted-ring / predicted-hierarchical: the
                      step model's rows (repeats 0; samples/s is the measured base
                      per rank x np x the predicted efficiency)
nodes and global_batch are what ringtrain itself reported at start-up.
DIR/runs.csv has one row per run: np, repeat, nodes, global_batch,
samples_per_s (from the median step), samples_per_s_mean (samples over time of
the windows after warm-up), exposed_comm_share.
The plot needs gnuplot (Debian: gnuplot-nox, see launch/install-deps.sh);
without it the CSV is still written and the study says the plot is missing.
EOF
}

# ---------------------------------------------------------------------------
# Options.
# ---------------------------------------------------------------------------
max_np=4
np_list=""
steps=100
run_timeout=0
out=""
machinefile=""
gpus_per_node=""
netns_nodes=""
link_rate=""
link_delay=""
delayed_acks=0
repeats=3
predict=""
comm_model=""
predict_backend=""
predict_rpn=""
predict_cores=""
allow_poor=0
oversubscribe=0
global_batch=""
exe=${RINGTRAIN_EXE:-${BUILD_DIR:-$here/../build}/ringtrain}
train_args=()

is_count() { [[ $1 =~ ^[0-9]+$ ]] && [ "$((10#$1))" -ge 1 ]; }
need_value() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value (see --help)"; }

while [ $# -gt 0 ]; do
  case $1 in
    --max-np) need_value "$@"; max_np=$2; shift 2 ;;
    --np) need_value "$@"; np_list=$2; shift 2 ;;
    --steps) need_value "$@"; steps=$2; shift 2 ;;
    --global-batch) need_value "$@"; global_batch=$2; shift 2 ;;
    --run-timeout) need_value "$@"; run_timeout=$2; shift 2 ;;
    -o|--out) need_value "$@"; out=$2; shift 2 ;;
    --machinefile) need_value "$@"; machinefile=$2; shift 2 ;;
    --gpus-per-node) need_value "$@"; gpus_per_node=$2; shift 2 ;;
    --netns-nodes) need_value "$@"; netns_nodes=$2; shift 2 ;;
    --link-rate) need_value "$@"; link_rate=$2; shift 2 ;;
    --link-delay) need_value "$@"; link_delay=$2; shift 2 ;;
    --delayed-acks) delayed_acks=1; shift ;;
    --repeats) need_value "$@"; repeats=$2; shift 2 ;;
    --predict) need_value "$@"; predict=$2; shift 2 ;;
    --comm-model) need_value "$@"; comm_model=$2; shift 2 ;;
    --predict-backend) need_value "$@"; predict_backend=$2; shift 2 ;;
    --ranks-per-node) need_value "$@"; predict_rpn=$2; shift 2 ;;
    --cores-per-node) need_value "$@"; predict_cores=$2; shift 2 ;;
    --allow-poor-fit) allow_poor=1; shift ;;
    --oversubscribe) oversubscribe=1; shift ;;
    --exe) need_value "$@"; exe=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; train_args=("$@"); break ;;
    *) die "unknown option '$1' (ringtrain train flags go after '--'; see --help)" ;;
  esac
done

[ -n "$out" ] || die "-o DIR is required (where the CSV, plot and run logs go)"
[ ${#train_args[@]} -gt 0 ] || die "no training flags: give them after '--', e.g. -- --data d.h5 --model cnn"
is_count "$max_np" || die "--max-np must be a positive whole number, got '$max_np'"
is_count "$steps" && [ "$steps" -ge 2 ] || die "--steps must be a whole number >= 2 (one warm-up window plus at least one measured), got '$steps'"
[[ $run_timeout =~ ^[0-9]+$ ]] || die "--run-timeout must be a whole number of seconds, got '$run_timeout'"
[ -x "$exe" ] || die "ringtrain binary '$exe' is not an executable (build it, or give --exe / RINGTRAIN_EXE)"
[ -z "$machinefile" ] || [ -z "$netns_nodes" ] || die "--machinefile and --netns-nodes exclude each other"
[ -z "$gpus_per_node" ] || [ -n "$machinefile" ] || die "--gpus-per-node needs --machinefile"
[ -z "$gpus_per_node" ] || is_count "$gpus_per_node" || die "--gpus-per-node must be a positive whole number, got '$gpus_per_node'"
[ -z "$machinefile" ] || [ -f "$machinefile" ] || die "machinefile '$machinefile' does not exist"
[ -z "$netns_nodes" ] || is_count "$netns_nodes" || die "--netns-nodes must be a positive whole number, got '$netns_nodes'"
[ -n "$netns_nodes" ] || [ -z "$link_rate$link_delay" ] || die "--link-rate and --link-delay shape the links of --netns-nodes; give --netns-nodes"
[ -n "$netns_nodes" ] || [ "$delayed_acks" -eq 0 ] || die "--delayed-acks sets the TCP of --netns-nodes; give --netns-nodes"
# Every netns-cluster the study starts (runs and comm model) gets the same TCP.
netns_tcp=()
[ "$delayed_acks" -eq 0 ] || netns_tcp=(--delayed-acks)
is_count "$repeats" || die "--repeats must be a positive whole number, got '$repeats'"
if [ -n "$predict" ]; then
  [[ $predict =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--predict must be a comma-separated list of node counts, e.g. 1,2,4,8, got '$predict'"
  IFS=, read -r -a _p <<<"$predict"
  for n in "${_p[@]}"; do is_count "$n" || die "--predict: node counts must be >= 1, got '$n' in '$predict'"; done
  [ -z "$comm_model" ] || [ -f "$comm_model" ] || die "--comm-model '$comm_model' does not exist"
  [ -n "$comm_model" ] || [ -n "$netns_nodes" ] || [ -z "$machinefile" ] ||
    die "--predict on --machinefile needs --comm-model FILE (run 'ringtrain bench model --json FILE' once per link tier)"
  [ -z "$predict_rpn" ] || is_count "$predict_rpn" || die "--ranks-per-node must be a positive whole number, got '$predict_rpn'"
  [ -z "$predict_cores" ] || is_count "$predict_cores" || die "--cores-per-node must be a positive whole number, got '$predict_cores'"
  case ${predict_backend:-shm} in shm|ring|mpi|nccl) ;; *) die "--predict-backend must be shm, ring, mpi or nccl, got '$predict_backend'" ;; esac
else
  [ -z "$comm_model$predict_backend$predict_rpn$predict_cores" ] || die "--comm-model, --predict-backend, --ranks-per-node and --cores-per-node go with --predict"
fi

if [ -n "$np_list" ]; then
  [[ $np_list =~ ^[0-9]+(,[0-9]+)*$ ]] || die "--np must be a comma-separated list of rank counts, e.g. 1,2,4, got '$np_list'"
  IFS=, read -r -a nps <<<"$np_list"
  for n in "${nps[@]}"; do is_count "$n" || die "--np: rank counts must be >= 1, got '$n' in '$np_list'"; done
  for i in "${!nps[@]}"; do nps[i]=$((10#${nps[i]})); done
  mapfile -t nps < <(printf '%s\n' "${nps[@]}" | sort -n)
  [ "$(printf '%s\n' "${nps[@]}" | sort -u | wc -l)" -eq ${#nps[@]} ] || die "--np lists a rank count twice: '$np_list'"
else
  mapfile -t nps < <(seq 1 "$max_np")
fi

train_flag() {  # train_flag NAME DEFAULT: the value of --NAME in the training flags
  local i a v=$2
  for ((i = 0; i < ${#train_args[@]}; i++)); do
    a=${train_args[i]}
    case $a in
      "--$1="*) v=${a#--"$1"=} ;;
      "--$1") v=${train_args[i + 1]:-} ;;
    esac
  done
  printf '%s\n' "$v"
}

# The study owns these: a user value would change what is measured or where
# it is written.
for ((i = 0; i < ${#train_args[@]}; i++)); do
  a=${train_args[i]}
  case $a in
    --max-steps|--max-steps=*|--epochs|--epochs=*|--log-every|--log-every=*|--logdir|--logdir=*|--check-every|--check-every=*|--trace|--trace=*)
      die "'${a%%=*}' is set by the study itself (see --help); remove it from the training flags" ;;
    --batch|--batch=*)
      [ -z "$global_batch" ] || die "--global-batch sets the per-rank --batch of each run; remove --batch from the training flags" ;;
  esac
done
accum=$(train_flag accum 1)
train_backend=$(train_flag backend '')
bucket_mb=$(train_flag bucket-mb 1)
if [ -n "$global_batch" ]; then
  is_count "$global_batch" || die "--global-batch must be a positive whole number, got '$global_batch'"
  is_count "$accum" || die "--accum in the training flags must be a positive whole number, got '$accum'"
  for n in "${nps[@]}"; do
    [ $((global_batch % (n * accum))) -eq 0 ] ||
      die "--global-batch $global_batch is not divisible by np=$n x accum $accum: pick rank counts that divide it"
  done
fi

# A plain mpirun on this machine needs what ringtrain-mpirun would set up.
if [ -z "$machinefile" ] && [ -z "$netns_nodes" ]; then
  # shellcheck source=launch/env.sh
  source "$here/env.sh"
fi

log_every=$((steps / 5))
[ "$log_every" -ge 1 ] || log_every=1
mkdir -p "$out/runs" || die "cannot create output directory '$out'"
out=$(cd "$out" && pwd)
csv=$out/scaling.csv
png=$out/scaling.png

# ---------------------------------------------------------------------------
# One run: launch, then read the numbers back from what ringtrain wrote.
# ---------------------------------------------------------------------------
launch_cmd() {  # launch_cmd NP: sets cmd (the argv that runs NP ranks)
  local n=$1 nodes rpn
  cmd=()
  [ "$run_timeout" -eq 0 ] || cmd=(timeout --kill-after=15 "$run_timeout")
  if [ -n "$netns_nodes" ]; then
    nodes=$((n < netns_nodes ? n : netns_nodes))
    rpn=$(((n + nodes - 1) / nodes))
    cmd+=("$here/netns-cluster" --nodes "$nodes" --ranks-per-node "$rpn" -n "$n")
    [ -z "$link_rate" ] || cmd+=(--link-rate "$link_rate")
    [ -z "$link_delay" ] || cmd+=(--link-delay "$link_delay")
    cmd+=("${netns_tcp[@]}")
    [ "$oversubscribe" -eq 0 ] || cmd+=(--oversubscribe)
    cmd+=(--)
  elif [ -n "$machinefile" ]; then
    cmd+=("$here/ringtrain-mpirun" -n "$n" --machinefile "$machinefile")
    [ -z "$gpus_per_node" ] || cmd+=(--gpus-per-node "$gpus_per_node")
    [ "$oversubscribe" -eq 0 ] || cmd+=(--oversubscribe)
    cmd+=(--)
  else
    cmd+=(mpirun -np "$n")
    [ "$oversubscribe" -eq 0 ] || cmd+=(--oversubscribe)
  fi
  cmd+=("$exe" train "${train_args[@]}")
  [ -z "$global_batch" ] || cmd+=(--batch "$((global_batch / (n * accum)))")
  cmd+=(--max-steps "$steps" --epochs 1000000 --check-every 0 --log-every "$log_every")
}

# summarize METRICS GLOBAL_BATCH: prints "samples_per_s exposed_comm_share
# windows samples_per_s_mean" over the "kind":"train" lines after the first.
# Each window spans window_steps steps (older binaries: step - previous step);
# its samples are samples_per_s x time, its time steps x window_step_s.
# samples_per_s is GLOBAL_BATCH over the summary's step_s_median (the mean
# where the summary has none).
summarize() {
  awk -v gb="$2" '
    function num(key,   re, s) {
      re = "\"" key "\":[-+0-9.eE]+"
      if (!match($0, re)) return "";
      s = substr($0, RSTART, RLENGTH); sub(/^[^:]*:/, "", s); return s + 0
    }
    /"kind":"train"/ {
      step = num("step"); sps = num("samples_per_s"); st = num("step_s"); ex = num("exposed_comm_s")
      if (step == "" || sps == "" || st == "" || ex == "") { bad = 1; next }
      # A window: its steps and their mean times where ringtrain reports them
      # (window_steps, window_step_s, window_exposed_comm_s), else the logged
      # step standing for it.
      k = num("window_steps"); wst = num("window_step_s"); wex = num("window_exposed_comm_s")
      if (k == "" || k <= 0) k = step - prev
      if (wst != "" && wst > 0) { st = wst; if (wex != "") ex = wex }
      n++
      if (n > 1 && step > prev) {
        t = k * st
        time += t; samples += sps * t; exposed += k * ex; windows++
      }
      prev = step
    }
    /"kind":"summary"/ { med = num("step_s_median") }
    END {
      if (bad) { print "malformed"; exit }
      if (windows == 0 || time <= 0) { print "nowindows " n + 0; exit }
      mean = samples / time
      typical = (med != "" && med > 0 && gb > 0) ? gb / med : mean
      printf "%.6g %.6f %d %.6g\n", typical, exposed / time, windows, mean
    }' "$1"
}

run_one() {  # run_one NP REPEAT: appends "np nodes gbatch sps share repeat" to runs[]
  local n=$1 k=$2 dir=$out/runs/np$1/r$2 rc=0 summary nodes gbatch sps share windows sps_mean
  rm -rf "$dir"; mkdir -p "$dir"
  launch_cmd "$n"
  cmd+=(--logdir "$dir" --trace "$dir/trace.json")
  say "np=$n, repeat $k/$repeats: ${cmd[*]}"
  printf '%q ' "${cmd[@]}" >"$dir/command"; echo >>"$dir/command"
  # In the background, so a SIGTERM or Ctrl-C to the study reaches the run
  # (see on_signal) instead of leaving it behind.
  "${cmd[@]}" >"$dir/output.log" 2>&1 &
  child=$!
  wait "$child" || rc=$?
  child=""
  if [ "$rc" -ne 0 ]; then
    tail -n 15 "$dir/output.log" | sed 's/^/  | /' >&2
    case $rc in
      124|137) say "np=$n: the run exceeded --run-timeout $run_timeout s (log: $dir/output.log)" ;;
      77) say "np=$n: the launcher cannot run here (see its reason above; log: $dir/output.log)" ;;
      *) say "np=$n: the run failed with exit code $rc (log: $dir/output.log)" ;;
    esac
    return 1
  fi
  [ -s "$dir/metrics.jsonl" ] || { say "np=$n: the run wrote no $dir/metrics.jsonl"; return 1; }
  # "ringtrain train: 4 rank(s) on 2 node(s), ..." and "global batch 256 = ...",
  # printed by rank 0 at start-up.
  nodes=$(sed -n 's/.*ringtrain train: \([0-9]*\) rank(s) on \([0-9]*\) node(s).*/\1 \2/p' "$dir/output.log" | head -n 1)
  gbatch=$(sed -n 's/^ *global batch \([0-9]*\) = .*/\1/p' "$dir/output.log" | head -n 1)
  [ -n "$nodes" ] && [ -n "$gbatch" ] || { say "np=$n: no start-up lines (rank count, global batch) in $dir/output.log"; return 1; }
  [ "${nodes%% *}" -eq "$n" ] || { say "np=$n: ringtrain reports ${nodes%% *} rank(s), not $n (log: $dir/output.log)"; return 1; }
  nodes=${nodes##* }
  [ -z "$global_batch" ] || [ "$gbatch" -eq "$global_batch" ] ||
    { say "np=$n: ringtrain reports global batch $gbatch, not --global-batch $global_batch (log: $dir/output.log)"; return 1; }
  summary=$(summarize "$dir/metrics.jsonl" "$gbatch")
  case $summary in
    malformed) say "np=$n: a train line of $dir/metrics.jsonl lacks step, samples_per_s, step_s or exposed_comm_s"; return 1 ;;
    nowindows*) say "np=$n: $dir/metrics.jsonl has ${summary#* } train window(s); the study needs two (warm-up + measured): raise --steps"; return 1 ;;
  esac
  read -r sps share windows sps_mean <<<"$summary"
  runs+=("$n $nodes $gbatch $sps $share $k $sps_mean")
  say "np=$n, repeat $k: $nodes node(s), global batch $gbatch, $sps samples/s (median step; mean $sps_mean), exposed comm $share of the step ($windows window(s) of $log_every step(s) after warm-up)"
}

# aggregate: rows[] = one line per np, "np nodes gbatch median min max share
# repeats", from runs[] (medians of samples/s and of the exposed share).
aggregate() {
  rows=()
  [ ${#runs[@]} -gt 0 ] || return 0
  mapfile -t rows < <(printf '%s\n' "${runs[@]}" | sort -k1,1n -k4,4g | awk '
    function median(a, c) { return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2 }
    function flush(   i, j, t) {
      if (c == 0) return
      # shares in order for their own median (insertion sort: c is small)
      for (i = 2; i <= c; i++) { t = sh[i]; for (j = i - 1; j >= 1 && sh[j] > t; j--) sh[j + 1] = sh[j]; sh[j + 1] = t }
      printf "%d %d %d %.6g %.6g %.6g %.6f %d\n", np, nodes, gb, median(v, c), v[1], v[c], median(sh, c), c
      c = 0; split("", v); split("", sh)
    }
    $1 != np { flush(); np = $1 }
    { nodes = $2; gb = $3; v[++c] = $4; sh[c] = $5 }
    END { flush() }')
}

# The measured rows: efficiency of the median and of each repeat's extremes,
# against the smallest np's median per rank.
measured_csv() {
  local base_np base_sps
  [ ${#rows[@]} -gt 0 ] || return 0
  read -r base_np _ _ base_sps _ <<<"${rows[0]}"
  printf '%s\n' "${rows[@]}" | awk -v bn="$base_np" -v bs="$base_sps" '
    { e = bs / bn * $1
      printf "%d,%d,%d,%.1f,%.4f,%.4f,%.1f,%.1f,%.4f,%.4f,%d,measured\n", $1, $2, $3, $4, $4 / e, $7, $5, $6, $5 / e, $6 / e, $8 }'
}

csv_header="np,nodes,global_batch,samples_per_s,scaling_efficiency,exposed_comm_share,samples_per_s_min,samples_per_s_max,efficiency_min,efficiency_max,repeats,source"
write_csv() {
  aggregate
  {
    echo "$csv_header"
    measured_csv
    [ ! -s "$out/predicted-rows.csv" ] || cat "$out/predicted-rows.csv"
  } >"$csv"
  {
    echo "np,repeat,nodes,global_batch,samples_per_s,samples_per_s_mean,exposed_comm_share"
    [ ${#runs[@]} -eq 0 ] || printf '%s\n' "${runs[@]}" | awk '{ printf "%d,%d,%d,%d,%s,%s,%s\n", $1, $6, $2, $3, $4, $7, $5 }'
  } >"$out/runs.csv"
}

plot() {
  local gp=$out/scaling.gp title base_np base_sps logx=""
  title="ringtrain train ${train_args[*]}"
  [ -z "$global_batch" ] || title+=", global batch $global_batch"
  [ -z "$link_rate$link_delay" ] || title+=", links ${link_rate:-unshaped} ${link_delay:++$link_delay}"
  title=${title//\"/\'}
  read -r base_np _ _ base_sps _ <<<"${rows[0]}"
  [ -z "$predict" ] || logx="set logscale x 2"
  # Ideal line: the base run's per-rank throughput times np, over the measured
  # rank counts (predicted ones would stretch the axis). Measured points
  # carry error bars from min to max over the repeats; predicted ones are
  # dotted lines with open points.
  cat >"$gp" <<EOF
# Made by launch/scaling-study.sh from scaling.csv; rerun with: gnuplot scaling.gp
set terminal pngcairo size 1000,620 font ",11"
set output "$png"
set datafile separator ","
base_per_rank = $base_sps / $base_np
measured(col) = strcol(12) eq "measured" ? column(col) : 1/0
ring(col) = strcol(12) eq "predicted-ring" ? column(col) : 1/0
hier(col) = strcol(12) eq "predicted-hierarchical" ? column(col) : 1/0
set key below horizontal
set title "$title\n${steps} steps per run, the first ${log_every} as warm-up, ${repeats} repeat(s) per point (bars: min to max)" noenhanced
set xlabel "ranks (np)"
set ylabel "samples/s (global)"
set y2label "scaling efficiency, exposed comm share"
set format y "%.1s%c"
$logx
set offsets graph 0.05, graph 0.05, 0, 0
set yrange [0:*]
set y2range [0:1.2]
set y2tics 0.2
set ytics nomirror
set grid xtics ytics
EOF
  local lines=(
    "\"$csv\" using 1:(measured(4)):(measured(7)):(measured(8)) skip 1 with yerrorlines lw 2 pt 7 ps 1.3 lc rgb \"#1f77b4\" title \"samples/s\""
    "\"$csv\" using 1:(measured(1) * base_per_rank) skip 1 with lines dt 2 lc rgb \"#1f77b4\" title \"ideal (linear)\""
    "\"$csv\" using 1:(measured(5)):(measured(9)):(measured(10)) skip 1 axes x1y2 with yerrorlines lw 2 pt 5 ps 1.2 lc rgb \"#d62728\" title \"efficiency\""
    "\"$csv\" using 1:(measured(6)) skip 1 axes x1y2 with linespoints lw 1 pt 4 ps 1.0 lc rgb \"#7f7f7f\" title \"exposed comm share\"")
  if [ -s "$out/predicted-rows.csv" ]; then
    lines+=(
      "\"$csv\" using 1:(ring(5)) skip 1 axes x1y2 with linespoints dt 3 lw 2 pt 6 ps 1.2 lc rgb \"#ff7f0e\" title \"predicted efficiency (ring)\""
      "\"$csv\" using 1:(hier(5)) skip 1 axes x1y2 with linespoints dt 4 lw 2 pt 8 ps 1.2 lc rgb \"#2ca02c\" title \"predicted efficiency (hierarchical)\"")
  fi
  local sep="plot "
  for l in "${lines[@]}"; do printf '%s%s' "$sep" "$l" >>"$gp"; sep=$', \\\n     '; done
  echo >>"$gp"
  gnuplot "$gp"
}

# ---------------------------------------------------------------------------
# Prediction: the communication model (measured unless given), then
# 'ringtrain bench predict' on the trace of the base point's median run.
# ---------------------------------------------------------------------------
run_logged() {  # run_logged LOG CMD...: runs CMD in the background (signals reach it)
  local log=$1 rc=0
  shift
  printf '%q ' "$@" >"$log.command"; echo >>"$log.command"
  "$@" >"$log" 2>&1 &
  child=$!
  wait "$child" || rc=$?
  child=""
  [ "$rc" -eq 0 ] || { tail -n 15 "$log" | sed 's/^/  | /' >&2; say "failed with exit code $rc: $* (log: $log)"; }
  return "$rc"
}

measure_comm_model() {  # measure_comm_model RANKS_PER_NODE TRACE DIR: writes DIR/comm-model.json
  local dir=$3 shaping=() cmd_model rpn=$1 trace=$2
  local model=$dir/comm-model.json
  mkdir -p "$dir"
  rm -f "$model"
  cmd_model=("$exe" bench model --device cpu --backend "$backend" --json "$model")
  # Fit the sizes the runs all-reduce: half to twice --bucket-mb, where their
  # buckets are, and the smallest bucket the trace recorded when it is below
  # that (e.g. the mlp's output layer of 20 KiB: its all-reduce costs the
  # latency that a fit of large sizes does not see). One small size pins the
  # latency; the large ones keep the bandwidth where the bytes are (a sweep of
  # every factor of 2 down to it weighs the small sizes as much in the fit).
  # A shaped link (tbf lets a burst through at full speed) is not one line
  # from 4 KiB to 16 MiB.
  local cap smallest
  cap=$(awk -v m="$bucket_mb" 'BEGIN { if (m + 0 > 0) printf "%.0f", m * 1048576 }')
  smallest=$(grep -o '"args":{"bytes":[0-9]*},"dur":[0-9.e+-]*,"name":"bucket [0-9]* ready"' "$trace" 2>/dev/null |
             sed 's/^"args":{"bytes":\([0-9]*\)}.*/\1/' | sort -n | head -n 1 || true)
  if [ -n "$cap" ]; then
    if [ -n "$smallest" ] && [ "$smallest" -ge 4 ] && [ "$smallest" -lt $((cap / 2)) ]; then
      cmd_model+=(--sizes "$smallest,$((cap / 2)),$cap,$((cap * 2))")
    else
      cmd_model+=(-b "$((cap / 2))" -e "$((cap * 2))" -f 2)
    fi
  fi
  # On this machine the ranks' communication may share the cores they compute
  # on: time the all-reduces beside compute too (bench predict uses it there).
  [ -n "$machinefile" ] || cmd_model+=(--under-load)
  # And right after a step's compute (a rank alone at the per-rank batch of the
  # largest point, as this round timed it): ranks that share cores end it
  # apart, and the exposed all-reduce waits for the last.
  local after_ms
  after_ms=$(tail -n 1 "$out/compute-curve/b$(batch_of "${nps[${#nps[@]} - 1]}").jsonl" 2>/dev/null |
             awk 'match($0, /"step_ms_synchronous": *[-+0-9.eE]+/) { v = substr($0, RSTART, RLENGTH); sub(/^[^:]*: */, "", v); printf "%.3f", v + 0 }' || true)
  [ -n "$machinefile" ] || [ -z "$after_ms" ] || cmd_model+=(--after-compute "$after_ms")
  if [ -n "$netns_nodes" ]; then
    [ "$netns_nodes" -ge 2 ] || { say "--predict needs a tier across nodes: --netns-nodes 2 or more (or --comm-model FILE)"; return 1; }
    [ -z "$link_rate" ] || shaping+=(--link-rate "$link_rate")
    [ -z "$link_delay" ] || shaping+=(--link-delay "$link_delay")
    shaping+=("${netns_tcp[@]}")
    # Each node count the study runs (a ring over shaped links is not the same
    # line at every size), the largest last: bench predict takes the fit of
    # the nearest node count.
    local nn counts=() np_
    for np_ in "${nps[@]}"; do
      nn=$((np_ < netns_nodes ? np_ : netns_nodes))
      [ "$nn" -lt 2 ] || [[ " ${counts[*]} " == *" $nn "* ]] || counts+=("$nn")
    done
    [[ " ${counts[*]} " == *" $netns_nodes "* ]] || counts+=("$netns_nodes")
    for nn in "${counts[@]}"; do
      local log=$dir/comm-model-inter.log
      [ "$nn" -eq "$netns_nodes" ] || log=$dir/comm-model-inter-n$nn.log
      say "measuring the link across nodes: $nn node(s), one rank each"
      run_logged "$log" "$here/netns-cluster" --nodes "$nn" --ranks-per-node 1 \
        "${shaping[@]}" -- "${cmd_model[@]}" || return 1
    done
    if [ "$rpn" -gt 1 ]; then
      say "measuring the link inside a node: $rpn rank(s)"
      run_logged "$dir/comm-model-intra.log" "$here/netns-cluster" --nodes 1 --ranks-per-node "$rpn" \
        "${netns_tcp[@]}" --oversubscribe -- "${cmd_model[@]}" || return 1
    fi
  else
    local np_intra=$((rpn > 1 ? rpn : 2))
    local mp=(mpirun -np "$np_intra")
    [ "$oversubscribe" -eq 0 ] || mp+=(--oversubscribe)
    say "measuring the link inside this node: $np_intra rank(s)"
    run_logged "$dir/comm-model-intra.log" "${mp[@]}" "${cmd_model[@]}" || return 1
  fi
  grep -h ' fit' "$dir"/comm-model-*.log | sed 's/^/  /' >&2 || true
}

# Compute per step ('ringtrain bench step', synthetic samples of the data set's
# shape) at each per-rank batch the prediction needs (strong scaling: a small
# batch is slower per sample than the profiled one), one rank alone; and, where
# the study's ranks share this machine (netns nodes, a plain mpirun), with as
# many ranks at once as each measured point runs (they share its cores, caches
# and memory bandwidth; bench step's step_ms_synchronous counts). Each point is
# timed in every repeat round just before the runs it belongs to, so compute
# and runs see the machine in the same state (its speed drifts over minutes).
batch_of() {  # batch_of W: the per-rank micro-batch at W ranks, or nothing
  if [ -z "$global_batch" ]; then train_flag batch 64
  elif [ $((global_batch % ($1 * accum))) -eq 0 ]; then echo $((global_batch / ($1 * accum)))
  fi
}
curve_pairs=()  # "BATCH RANKS_AT_ONCE NP": timed before the runs at NP
plan_compute_curve() {
  local w b owner _w=()
  local -A seen=()
  IFS=, read -r -a _w <<<"$predict"
  for w in "${nps[@]}" "${_w[@]}"; do
    w=$((10#$w)); b=$(batch_of "$w")
    [ -n "$b" ] && [ -z "${seen[$b 1]:-}" ] || continue
    owner=${nps[0]}; [[ " ${nps[*]} " != *" $w "* ]] || owner=$w
    seen[$b 1]=1; curve_pairs+=("$b 1 $owner")
  done
  if [ -z "$machinefile" ]; then
    for w in "${nps[@]}"; do
      b=$(batch_of "$w")
      [ "$w" -gt 1 ] && [ -n "$b" ] && [ -z "${seen[$b $w]:-}" ] || continue
      seen[$b $w]=1; curve_pairs+=("$b $w $w")
    done
  fi
  mkdir -p "$out/compute-curve"
  say "timing compute per step (bench step, each repeat round before the runs) at per-rank batch x ranks at once: $(printf '%s\n' "${curve_pairs[@]}" | cut -d' ' -f1,2 | sed 's/ / x /' | paste -sd, | sed 's/,/, /g')"
}
time_compute() {  # time_compute NP ROUND: this round's points that belong to NP
  local p b k w name launch=() step_cmd
  [ -z "$machinefile" ] || {
    launch=("$here/ringtrain-mpirun" -n 1 --machinefile "$machinefile")
    [ -z "$gpus_per_node" ] || launch+=(--gpus-per-node "$gpus_per_node")
    launch+=(--)
  }
  for p in "${curve_pairs[@]}"; do
    read -r b k w <<<"$p"
    [ "$w" -eq "$1" ] || continue
    name=b$b; [ "$k" -eq 1 ] || name=b$b-k$k
    local at_once=("${launch[@]}") timing=(--min-time 1)
    # Ranks at once: rounds of rank 0 alone and all at once, so that the
    # slowdown is taken within seconds, not across runs the machine's drift
    # sets apart.
    [ "$k" -eq 1 ] || { at_once=("$here/ringtrain-mpirun" -n "$k" --oversubscribe --); timing=(--min-time 1.5 --side-by-side 6); }
    step_cmd=("${at_once[@]}" "$exe" bench step --data "$(train_flag data '')" --model "$(train_flag model cnn)"
      --optimizer "$(train_flag optimizer sgd)" --device "$(train_flag device auto)" --tf32 "$(train_flag tf32 default)"
      --batch "$b" --steps 5 --warmup 3 "${timing[@]}" --json)
    run_logged "$out/compute-curve/$name-r$2.log" "${step_cmd[@]}" || return 1
    grep '^{' "$out/compute-curve/$name-r$2.log" >>"$out/compute-curve/$name.jsonl" ||
      { say "bench step printed no JSON (log: $out/compute-curve/$name-r$2.log)"; return 1; }
  done
}
finish_compute_curve() {  # finish_compute_curve PROFILE_NP: writes $out/compute-curve.jsonl
  local curve=$out/compute-curve.jsonl p b k w name
  : >"$curve"
  # Each point keeps its median round, so one slow spell does not bend the
  # curve: by its time alone, by its slowdown with ranks at once.
  for p in "${curve_pairs[@]}"; do
    read -r b k w <<<"$p"
    name=b$b key=step_ms_synchronous; [ "$k" -eq 1 ] || name=b$b-k$k key=slowdown_beside
    awk -v key="$key" '{ if (!match($0, "\"" key "\": *[-+0-9.eE]+")) { bad = 1; exit }
           v = substr($0, RSTART, RLENGTH); sub(/^[^:]*: */, "", v); t[NR] = v + 0; line[NR] = $0 }
         END { if (bad || NR == 0) exit 1; n = NR; for (i = 1; i <= n; i++) { r = 0
                 for (j = 1; j <= n; j++) if (t[j] < t[i] || (t[j] == t[i] && j < i)) r++
                 if (r == int((n - 1) / 2)) print line[i] } }' "$out/compute-curve/$name.jsonl" >>"$curve" ||
      { say "bench step wrote no $key (in $out/compute-curve/$name.jsonl)"; return 1; }
    # Rounds that disagree: the machine was noisy while compute was timed, so
    # the prediction is not to be trusted (as for the runs' repeats).
    local what="compute at batch $b alone (ms)"
    [ "$k" -eq 1 ] || what="the slowdown at batch $b with $k rank(s) at once"
    awk -v key="$key" -v what="$what" '
      match($0, "\"" key "\": *[-+0-9.eE]+") { v = substr($0, RSTART, RLENGTH); sub(/^[^:]*: */, "", v); t[++m] = v + 0 }
      END { if (m < 2) exit; for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (t[j] < t[i]) { x = t[i]; t[i] = t[j]; t[j] = x }
            med = t[int((m + 1) / 2)]; s = (t[m] - t[1]) / med
            if (s > 0.15) printf "warning: the %d rounds of %s spread %.0f%% of their median (%.3f-%.3f): the machine was noisy, so the prediction is not to be trusted\n", m, what, 100 * s, t[1], t[m] }' \
      "$out/compute-curve/$name.jsonl" | while read -r line; do say "$line"; done
  done
  extra+=(--compute-curve "$curve" --profile-batch "$(batch_of "$1")")
  # Every rank of this study on this machine: compute beside the others.
  [ -n "$machinefile" ] || extra+=(--colocation all)
}

# Where the predicted ranks sit and whose fits price their all-reduces: set
# before the rounds, as each round measures the communication model for it.
plan_prediction() {  # sets top_np, rpn_pred, backend and algos
  local nn
  top_np=${nps[${#nps[@]} - 1]}
  if [ -n "$predict_rpn" ]; then rpn_pred=$predict_rpn
  elif [ -n "$gpus_per_node" ]; then rpn_pred=$gpus_per_node
  elif [ -n "$netns_nodes" ]; then
    nn=$((top_np < netns_nodes ? top_np : netns_nodes)); rpn_pred=$(((top_np + nn - 1) / nn))
  else rpn_pred=$top_np
  fi
  backend=$predict_backend
  if [ -z "$backend" ]; then
    case ${train_backend:-auto} in auto) backend=shm ;; *) backend=$train_backend ;; esac
  fi
  # The backend's own algorithm first: the verdict is about it.
  case $backend in shm) algos=hierarchical,ring ;; *) algos=ring,hierarchical ;; esac
}

# The prediction's row that picks the median round: the largest measured rank
# count, else the largest predicted one (the backend's own algorithm).
efficiency_of() {  # efficiency_of PREDICTED_CSV: prints "EFFICIENCY RANKS" of that row
  awk -F, -v np="$top_np" -v a="${algos%%,*}" '
    NR > 1 && $3 == a { if ($2 == np) hit = $9; if ($2 + 0 >= top + 0) { top = $2; last = $9 } }
    END { if (hit != "") print hit, np; else if (last != "") print last, top }' "$1"
}

# Lines "VALUE TAG ...": the TAG of the lower median VALUE (ties: the lower TAG).
median_tag() { sort -g -k1,1 -k2,2 | awk '{ r[NR] = $2 } END { if (NR) print r[int((NR + 1) / 2)] }'; }

predict_points() {  # writes predicted.csv, predicted-rows.csv and verdict.txt
  local base_np base_sps base_gb scaling_kind=weak trace nn cores k d model
  local extra=() dirs=()
  [ "$allow_poor" -eq 0 ] || extra=(--allow-poor-fit)
  read -r base_np _ base_gb base_sps _ <<<"${rows[0]}"
  # The profile comes from the base point's median run (the slower of two), so
  # that one run caught in a slow spell of the machine does not set the
  # prediction.
  k=$(printf '%s\n' "${runs[@]}" | awk -v np="$base_np" '$1 == np { print $4, $6 }' | median_tag)
  trace=$out/runs/np$base_np/r$k/trace.json
  [ -n "$k" ] && [ -s "$trace" ] || { say "the median run at np=$base_np wrote no trace $trace"; return 1; }
  say "step profile: np=$base_np repeat $k (the median samples/s of its repeats)"
  [ -z "$global_batch" ] || scaling_kind=strong
  finish_compute_curve "$base_np" || return 1
  # Cores per node: netns nodes and a plain mpirun share this machine's cores.
  cores=$predict_cores
  if [ -z "$cores" ] && [ -z "$machinefile" ]; then
    nn=1
    [ -z "$netns_nodes" ] || nn=$((top_np < netns_nodes ? top_np : netns_nodes))
    cores=$(($(nproc) / nn)); [ "$cores" -ge 1 ] || cores=1
  fi
  [ -z "$cores" ] || extra+=(--cores-per-node "$cores")
  # One prediction per communication model: the one given, or each round's.
  if [ -n "$comm_model" ]; then dirs=("$out")
  else for ((k = 1; k <= repeats; k++)); do dirs+=("$out/rounds/r$k"); done
  fi
  for d in "${dirs[@]}"; do
    model=$comm_model; [ -n "$model" ] || model=$d/comm-model.json
    run_logged "$d/predict.log" "$exe" bench predict --device cpu --trace "$trace" --comm-model "$model" \
      --backend "$backend" --algorithm "$algos" --nodes "$predict" --ranks-per-node "$rpn_pred" \
      --scaling "$scaling_kind" --profile-ranks "$base_np" --csv "$d/predicted.csv" --force "${extra[@]}" || return 1
  done
  if [ -z "$comm_model" ]; then
    # The link's speed drifts over minutes on a shared machine, and one
    # measurement of it set the whole prediction: keep the round whose
    # prediction is the median (the lower of two), with its model and log.
    local picks chosen eff ranks
    picks=$(for d in "${dirs[@]}"; do
              read -r eff ranks < <(efficiency_of "$d/predicted.csv") && printf '%s %s\n' "$eff" "${d##*/r}"
            done | sort -g -k1,1 -k2,2)
    chosen=$(median_tag <<<"$picks")
    [ -n "$chosen" ] || { say "bench predict wrote no row to choose the median round by"; return 1; }
    read -r _ ranks < <(efficiency_of "$out/rounds/r$chosen/predicted.csv")
    say "prediction from round $chosen's communication model, the median of the rounds' predicted efficiencies at np=$ranks: $(awk '{ printf "%s%.3f (round %s)", (NR > 1 ? ", " : ""), $1, $2 }' <<<"$picks")"
    awk -v p="$prog" -v n="${#dirs[@]}" '{ e[NR] = $1 } END { med = e[int((NR + 1) / 2)]
      if (NR >= 2 && med > 0 && (e[NR] - e[1]) / med > 0.15)
        printf "%s: warning: the %d rounds'"'"' predictions spread %.0f%% of their median (%.3f to %.3f): the measured link speed changed between rounds, so the prediction is not to be trusted\n", p, n, 100 * (e[NR] - e[1]) / med, e[1], e[NR] }' <<<"$picks" >&2
    for f in predicted.csv predict.log predict.log.command comm-model.json; do cp "$out/rounds/r$chosen/$f" "$out/$f"; done
    for f in "$out/rounds/r$chosen"/comm-model-*; do cp "$f" "$out/"; done
  fi
  grep -E '^# (compute per rank from the curve|.* core\(s\): communication has no core of its own|[0-9]+ rank\(s\) at once on one machine)' "$out/predict.log" >&2 || true
  grep '^# warning' "$out/predict.log" >&2 || true
  grep '^predicted efficiency at ' "$out/predict.log" >"$out/verdict.txt" ||
    { say "bench predict printed no verdict (log: $out/predict.log)"; return 1; }
  # predicted.csv: nodes,ranks,algorithm,step_s,compute_s,comm_s,exposed_s,
  # exposed_share,scaling_efficiency,speedup -> the study's columns.
  awk -F, -v bs="$base_sps" -v bn="$base_np" -v gb="$base_gb" -v scaling="$scaling_kind" '
    NR == 1 { next }
    { np = $2; e = $9; sps = bs / bn * np * e
      g = scaling == "strong" ? gb : gb / bn * np
      printf "%d,%d,%d,%.1f,%.4f,%.4f,%.1f,%.1f,%.4f,%.4f,0,predicted-%s\n", np, $1, g, sps, e, $8, sps, sps, e, e, $3 }' \
    "$out/predicted.csv" >"$out/predicted-rows.csv"
}

# ---------------------------------------------------------------------------
# The study.
# ---------------------------------------------------------------------------
# SIGTERM or SIGINT: pass SIGTERM to the run (ringtrain-mpirun and netns-cluster
# stop their ranks and clean up on it), wait for it, then stop.
child=""
n=""
on_signal() {
  trap - TERM INT
  if [ -n "$child" ]; then
    say "$1: stopping the run at np=$n"
    kill -TERM "$child" 2>/dev/null || true
    wait "$child" 2>/dev/null || true
  fi
  write_csv
  say "interrupted by $1; $csv holds the runs that finished"
  exit 130
}
trap 'on_signal SIGTERM' TERM
trap 'on_signal SIGINT' INT

runs=()
rows=()
rm -rf "$out/predicted-rows.csv" "$out/predicted.csv" "$out/verdict.txt" "$out/compute-curve.jsonl" "$out/compute-curve" "$out/rounds"
[ -n "$comm_model" ] || rm -f "$out"/comm-model.json "$out"/comm-model-*.log "$out"/comm-model-*.log.command
say "rank counts ${nps[*]}, $repeats repeat(s), $steps steps per run (first window of $log_every as warm-up), output $out"
failed=0
# Repeats go round the rank counts rather than back to back, so a slow spell of
# a shared machine spreads over all points instead of hitting one.
[ -z "$predict" ] || { plan_compute_curve; plan_prediction; }
stopped_at=""
for ((k = 1; k <= repeats && failed == 0; k++)); do
  for n in "${nps[@]}"; do
    if [ -n "$predict" ]; then time_compute "$n" "$k" || { failed=1; stopped_at="np=$n"; break; }; fi
    run_one "$n" "$k" || { failed=1; stopped_at="np=$n"; break; }
  done
  # Each round measures the communication model right after its runs, as it
  # measures compute right before them: the link's speed drifts between
  # rounds like the machine's (predict_points keeps the median round).
  if [ "$failed" -eq 0 ] && [ -n "$predict" ] && [ -z "$comm_model" ]; then
    say "round $k: measuring the communication model after this round's runs"
    measure_comm_model "$rpn_pred" "$out/runs/np${nps[0]}/r$k/trace.json" "$out/rounds/r$k" ||
      { failed=1; stopped_at="round $k's communication model"; }
  fi
done
write_csv
echo "$prog: wrote $csv (${#runs[@]} run(s))" >&2
[ "$failed" -eq 0 ] || die "stopped at $stopped_at; the CSV holds the runs that finished"
# Repeats far apart mean the machine's speed changed under the study: the
# medians, and any comparison with the prediction, are then unreliable.
printf '%s\n' "${rows[@]}" | awk -v p="$prog" '
  $8 >= 2 && $4 > 0 && ($6 - $5) / $4 > 0.15 {
    printf "%s: warning: the %d repeats at np=%d spread %.0f%% of their median (%.1f to %.1f samples/s): the machine was noisy; more --repeats or a quieter machine make the medians trustworthy\n", p, $8, $1, 100 * ($6 - $5) / $4, $5, $6 }' >&2

if [ -n "$predict" ]; then
  predict_points || die "the prediction failed; $csv holds the measured runs"
  write_csv
fi

if ! command -v gnuplot >/dev/null; then
  say "warning: gnuplot is not installed, so there is no plot $png (apt-get install gnuplot-nox, or launch/install-deps.sh)"
else
  plot || die "gnuplot failed on $out/scaling.gp"
  say "wrote $png"
fi
column -s, -t <"$csv" 2>/dev/null || cat "$csv"
[ ! -s "$out/verdict.txt" ] || { echo; cat "$out/verdict.txt"; }
