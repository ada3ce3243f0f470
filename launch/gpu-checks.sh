#!/usr/bin/env bash
# gpu-checks.sh [--quick] [--dry-run] [--budget S] [--tar FILE] OUTDIR [CHECK...]
#
# The GPU checklist, run on a machine with a GPU from a CUDA build in build/ (the
# device tool's `bash .gpu/run.sh` unpacks one). Each check runs under its own time
# limit, writes OUTDIR/<step>.log, and adds a line "<step> PASS|FAIL|INFO|SKIP
# <detail>" to OUTDIR/summary.txt; a failing check does not stop the others. With no
# CHECK names, all run in the order below (the longest last, so that a cut-off run
# has the important answers):
#   env       nvidia-smi, library versions, ringtrain info --device cuda
#   cpusuite  the CPU suite on this GPU host (ctest -LE 'gpu|long|timing|slurm|netns'), in
#             the background beside ctest, nccl2 and train; awaited before latency
#   ctest     ctest -L gpu: every gpu test must pass, none skip (non-finite guard,
#             NCCL faults nan/stall/kill9 on 2 netns nodes, accumulation, ...)
#   nccl2     2 NCCL ranks on one GPU as 2 nodes of launch/netns-cluster: every
#             dtype and op, a rank killed with SIGKILL, a rank that never joins
#   latency   small-message all-reduce latency over netns sockets: NCCL default,
#             delayed ACKs, NCCL_PROTO=LL/Simple, one socket, under CUDA MPS, and the
#             CPU ring and MPI backends over the same veth pairs
#   train     cnn on Fashion-MNIST to >= 0.91 (0.90 on fewer than 40000 training
#             images, see launch/gpu-pack.sh) and 0 host syncs per steady step;
#             GPU vs CPU after 20 steps; accum 2 --cache vs the doubled batch;
#             resume on GPU, eval on CPU; SIGTERM; 2 ranks sharing the GPU; repeat
#   sanitize  compute-sanitizer memcheck and racecheck: gpu_ops_test,
#             gpu_tensor_core_test, 20 steps of cnn and of resnet20 (fp32 and bf16;
#             racecheck: 3 steps at batch 8)
#             (in the background like cpusuite: its timings do not matter)
#   speed     bench step vs launch/bench/peer_gpu_step.py; bench allreduce nccl
#   models    the real-size presets side by side with PyTorch on the same GPU and cuDNN,
#             alternating which side goes first, 3 rounds (1 where ringtrain is below
#             0.25x): resnet50 b256 bf16 and TF32, inception3 b128 and vgg16 b128 bf16,
#             then their TF32, resnet50 fp32 and bf16 NCHW (MODELS_CASES); 0 host syncs
#             per steady step; then models-table.txt: each case's medians, ratio and
#             peak memory of both sides
#   models_why  for each case of models-table.txt below 1.0x: one `bench step --layers`
#             (time per layer, cuDNN's engines), then one --cuda-graph on (models
#             without dropout) and one with the convolutions' engines untimed
#             (RINGTRAIN_CONV_TUNE=off: the heuristics' first)
#   peers     PyTorch alone on the real-size models (launch/bench/peer_gpu_models.py)
#   loader    (named only) resnet50 bf16 b256 trained from JPEG photographs of ImageNet-like
#             sizes with --augment imagenet and a loader thread per spare core, against
#             the same images as raw 224 x 224 samples in memory: images/s, data share
#   kernels   (named only) kernel times summed per kernel, heaviest first: one steady
#             step of ringtrain under ncu, two of PyTorch under torch.profiler:
#             KERNELS_CASES="resnet50:256:bf16 ..."
#   gpt       gpt2 (124M) at 16 x 1024 tokens in bf16 side by side with PyTorch (bf16
#             autocast, F.scaled_dot_product_attention, fused AdamW), alternating, 2
#             rounds: tokens/s and model FLOPs utilisation of each, host syncs, peak
#             memory; then gpt-table.txt: medians and the ratio
#   gpt_why   gpt2 once each with the unfused attention (RINGTRAIN_ATTENTION=unfused,
#             against the default cuDNN SDPA), --cuda-graph on, --fuse off, and
#             `bench step --layers`
#
# --quick     for a second, short call: no cpusuite, speed or peers unless named, a
#             2-epoch accuracy run (>= 0.88), and CTEST_REGEX=... limits 'ctest'
# --dry-run   on a machine without a GPU: every step runs with a short limit (GPU
#             steps fail fast), so that a typo or an unknown flag shows before a
#             device call; a step whose log shows a command-line parse error is
#             reported BADFLAGS in either mode
# --budget S  stop starting steps when fewer than 20 s of S remain (default 540),
#             and cut each step's limit to what remains
# --tar FILE  after every check (and every round of models and gpt), tar OUTDIR into
#             FILE, and copy summary.txt and the tables beside it as FILE's name with
#             -summary.txt, -models.txt, -gpt.txt (what survives a killed call; a device
#             call brings back 8 files of \$OUT at most: keep OUTDIR outside it)
# CTEST_LIMIT the ctest check's time limit in seconds (default 330)
set -uo pipefail
quick=0 dry=0 budget=540 tarball=
while [ $# -gt 0 ]; do
  case $1 in
    --quick) quick=1; shift ;;
    --dry-run) dry=1; shift ;;
    --budget) budget=$2; shift 2 ;;
    --tar) tarball=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu-checks.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
out=${1:?usage: gpu-checks.sh [--quick] [--dry-run] [--budget S] [--tar FILE] OUTDIR [CHECK...]}
shift
mkdir -p "$out"
out=$(cd "$out" && pwd)
if [ -n "$tarball" ]; then
  mkdir -p "$(dirname "$tarball")" && tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")
fi
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
# shellcheck source=launch/env.sh
source launch/env.sh
# The peers need PyTorch: on a lent GPU machine it lives in the Python first on
# PATH (its own environment), not in Debian's, which launch/env.sh chose.
path_python=$(command -v "python3" || true)
if ! "$RINGTRAIN_PYTHON" -c 'import torch' 2> /dev/null && [ -n "$path_python" ] \
  && "$path_python" -c 'import torch' 2> /dev/null; then
  RINGTRAIN_PYTHON=$path_python
  export RINGTRAIN_PYTHON
fi
exe=$root/build/ringtrain
cmp=$root/build/tests/trainer/compare_checkpoints
work=$(mktemp -d /tmp/gpu-checks.XXXXXX)
# The convolutions' engines chosen by time (RINGTRAIN_CONV_TUNE, default on)
# are remembered here and kept with the logs: a check's later runs and rounds
# take the first run's engines, unless the caller names another record.
export RINGTRAIN_CONV_CACHE=${RINGTRAIN_CONV_CACHE:-$out/conv-engines.tsv}
# Each timed choice's candidates and their times (bench step --layers shows
# the chosen one and the heuristics' first only).
export RINGTRAIN_CONV_TIMES=${RINGTRAIN_CONV_TIMES:-$out/conv-times.tsv}
summary=$out/summary.txt
# a rerun into the same OUTDIR appends; the final tally counts this run's lines only
summary_from=$(($( [ -f "$summary" ] && wc -l < "$summary" || echo 0) + 1))
deadline=$((SECONDS + budget))
checks=("$@")
if [ ${#checks[@]} -eq 0 ]; then
  checks=(env cpusuite sanitize ctest nccl2 train latency speed gpt gpt_why models models_why peers)
  [ $quick = 1 ] && checks=(env ctest nccl2 train sanitize)
fi
wants() { local c; for c in "${checks[@]}"; do [ "$c" = "$1" ] && return 0; done; return 1; }

note() { echo "$1 $2 ${*:3}" | tee -a "$summary"; }
left() { echo $((deadline - SECONDS)); }
# run NAME LIMIT CMD...: one step under min(LIMIT, what the budget leaves), its log,
# its exit status (124 when cut off)
run() {
  local name=$1 limit=$2
  shift 2
  [ $dry = 1 ] && [ "$limit" -gt 30 ] && limit=30
  local room=$(($(left) - 15))
  if [ "$room" -lt 10 ]; then
    echo "+ $* (not run: budget spent)" > "$out/$name.log"; note "$name" SKIP "budget spent"; return 125
  fi
  [ "$limit" -gt "$room" ] && limit=$room
  echo "+ $*" > "$out/$name.log"
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@" >> "$out/$name.log" 2>&1
  local rc=$?
  echo "exit $rc after $((SECONDS - t0)) s (limit $limit s)" >> "$out/$name.log"
  # CLI11's parse errors and the wrappers' "unknown option": a script bug, not a GPU one
  if grep -qE 'The following argument was not expected|is required$|Could not convert|unknown option|not in \{|Run with --help' \
      "$out/$name.log"; then
    note "$name" BADFLAGS "$(grep -m1 -E 'not expected|is required|Could not convert|unknown option|not in \{' "$out/$name.log")"
  fi
  return $rc
}
pass_if() { if [ "$2" = 0 ]; then note "$1" PASS "${@:3}"; else note "$1" FAIL "exit $2 ${*:3}"; fi; }
last_ckpt() { find "$1" -maxdepth 1 -name 'ckpt-*.h5' 2>/dev/null | sort -V | tail -1; }
# metric DIR KIND FIELD: FIELD of the last KIND row of DIR/metrics.jsonl
metric() {
  "$RINGTRAIN_PYTHON" -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([r for r in rows if r.get("kind")==sys.argv[2]][-1][sys.argv[3]])' "$1/metrics.jsonl" "$2" "$3" 2>/dev/null || echo none
}
MPI=(mpirun --oversubscribe --bind-to none)
# Exact float comparisons with the CPU need TF32 off (the default lets cuDNN's
# convolutions use TF32, as PyTorch does). Not probed from `train --help | grep -q`:
# under pipefail grep's early exit fails the pipe, which left TF32 on (2026-11-26).
tf32=(--tf32 off)

fashion() {
  [ -s "$work/fashion.h5" ] || "$exe" convert idx -o "$work/fashion.h5" > "$out/convert.log" 2>&1
  echo "$work/fashion.h5"
}

check_env() {
  { nvidia-smi; nvidia-smi -q | grep -iE 'driver version|cuda version|product name|uuid'
    LD_LIBRARY_PATH=$(torch_library_path) "$RINGTRAIN_PYTHON" -c \
      'import torch; print("torch", torch.__version__, "cuDNN", torch.backends.cudnn.version())'
    echo "PyTorch's own cuDNN: ${torch_cudnn:-none found}"
    nproc; free -g; } > "$out/env.log" 2>&1
  run env-info 60 "$exe" info --device cuda
  pass_if env-info $? "$(grep -iE 'nccl|cudnn|driver' "$out/env-info.log" | tr '\n' ' ' | cut -c1-300)"
}

# Checks that run in the background: started in their turn, awaited before the
# first check that times something (latency, speed, peers) and at the end.
bg_pids=()
background() {
  local c=$1
  ( "check_$c" ) &
  bg_pids+=($!)
  note "$c" INFO "started in the background"
}
wait_background() {
  local p
  for p in "${bg_pids[@]}"; do wait "$p"; done
  bg_pids=()
}
check_cpusuite() {
  # launch/gpu-pack.sh carries the GPU tests' executables only, unless --all-tests
  if [ -f build/gpu-pack-tests.txt ] && [ $dry = 0 ]; then
    note cpusuite SKIP "the bundle carries the GPU tests only (launch/gpu-pack.sh --all-tests for all)"
    return
  fi
  # The CPU tests name --device cpu, so they run on a GPU host as they do in CI.
  # In the background: it needs CPUs only, and the GPU checks leave most idle.
  # The install tests need CMake, and launch/gpu-pack.sh leaves their tree behind.
  local args=(ctest -LE 'gpu|long|timing|slurm|netns|install' --output-on-failure --timeout 300 -j 8)
  [ -n "${CPUSUITE_REGEX:-}" ] && args+=(-R "$CPUSUITE_REGEX")
  [ $dry = 1 ] && args=(ctest -N -LE 'gpu|long|timing|slurm|netns|install')
  (cd build && run cpusuite 420 "${args[@]}")
  local rc=$?
  # A failure that the host's environment explains (a Python module, gnuplot or
  # CMake that the bundle does not carry) is listed, not counted against the run.
  if [ "$rc" != 0 ] && [ $dry = 0 ]; then
    "$RINGTRAIN_PYTHON" launch/ctest_host_failures.py "$out/cpusuite.log" > "$out/cpusuite-failures.txt" 2>&1 && rc=0
  fi
  pass_if cpusuite "$rc" "$(grep -E 'tests passed|tests failed|Total Tests' "$out/cpusuite.log" | tail -1);" \
    "$(tail -1 "$out/cpusuite-failures.txt" 2>/dev/null)"
  cp build/tests/eval/work/sigTERM/mpirun.log "$out/cpusuite-eval-watch-mpirun.log" 2>/dev/null
  grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|Not Run|SEGFAULT|Subprocess)' "$out/cpusuite.log" | head -30 >> "$summary"
}

check_ctest() {
  local sel=(-L gpu)
  [ -n "${CTEST_REGEX:-}" ] && sel=(-L gpu -R "$CTEST_REGEX")
  (cd build && run ctest "${CTEST_LIMIT:-330}" ctest "${sel[@]}" --output-on-failure --timeout 200)
  local rc=$?
  pass_if ctest $rc "$(grep -E 'tests passed|tests failed' "$out/ctest.log" | tail -1)"
  grep -E '^\s+[0-9]+ - .*\((Failed|Timeout|Not Run|SEGFAULT|Subprocess)' "$out/ctest.log" >> "$summary"
  grep -qE 'Not Run|\*\*\*Skipped' "$out/ctest.log" && note ctest FAIL "a gpu test skipped on a GPU host"
  # what the tests printed as their verdicts (flight verdicts, NaN messages)
  grep -hE '^PASS: |flight verdict: ' "$out/ctest.log" | cut -c1-300 > "$out/ctest-verdicts.txt"
}

check_nccl2() {
  local nc=(launch/netns-cluster --nodes 2 --ranks-per-node 1 --timeout 100 --)
  local rc=0 dt op
  # every dtype and op is checked element by element by ctest's
  # gpu_nccl_collectives_2nodes; the benchmark's own check covers these
  for dt in ${NCCL2_DTYPES:-f32 bf16 i64}; do
    for op in ${NCCL2_OPS:-sum avg}; do
      run "nccl2-$dt-$op" 100 "${nc[@]}" "$exe" bench allreduce --backend nccl --device cuda --dtype "$dt" \
        --op "$op" -b 8 -e 8M -f 8 -n 5 -w 1 --timeout 60 || rc=1
      cat "$out/nccl2-$dt-$op.log" >> "$out/nccl2.log"; rm -f "$out/nccl2-$dt-$op.log"
      [ $rc = 0 ] || break 2
    done
  done
  pass_if nccl2-dtypes $rc "(see nccl2.log; 'wrong' column must be 0)"
  # one rank killed with SIGKILL after 10 s of a long benchmark
  local t0=$SECONDS rc2
  run nccl2-kill 90 "${nc[@]}" tests/multinode/kill_rank_after.sh 1 10 "$exe" bench allreduce --backend nccl \
    --device cuda -b 64M -e 64M -n 100000 --timeout 30
  rc2=$?
  [ $rc2 != 0 ] && [ $rc2 != 124 ] && [ $((SECONDS - t0)) -le 60 ]
  pass_if nccl2-kill $? "exit $rc2 after $((SECONDS - t0)) s: $(grep -iE 'fatal|timed out|killed|signal' "$out/nccl2-kill.log" | head -2 | tr '\n' ' ' | cut -c1-300)"
  # a rank that never joins the NCCL communicator (after MPI is up): the other
  # rank's init must time out after --timeout and end the job, naming it
  t0=$SECONDS
  run nccl2-nojoin 90 env RINGTRAIN_FAULT_NCCL_LATE_RANK=1 "${nc[@]}" "$exe" bench allreduce --backend nccl \
    --device cuda -b 1M -e 1M -n 10 --timeout 20
  rc2=$?
  [ $rc2 != 0 ] && [ $rc2 != 124 ] && [ $((SECONDS - t0)) -le 60 ]
  pass_if nccl2-nojoin $? "exit $rc2 after $((SECONDS - t0)) s: $(grep -iE 'fatal|timed out|did not' "$out/nccl2-nojoin.log" | head -2 | tr '\n' ' ' | cut -c1-300)"
  run nccl2-bench 120 "${nc[@]}" "$exe" bench allreduce --backend nccl --device cuda -b 8 -e 256M -f 4 -n 20
  pass_if nccl2-bench $? "$(awk '$2 == 268435456 {print "256 MiB: busbw " $9 " GB/s"}' "$out/nccl2-bench.log")"
}

check_latency() {
  # The 4.8 ms small-message latency of round 1 (NCCL over sockets through veth
  # pairs): which of NCCL's protocol, its sockets, the kernel's delayed ACKs or
  # the harness itself sets it. Each run: 8 B to 1 MiB, 200 timed iterations.
  local sizes=(-b 8 -e 1M -f 8 -n 200 -w 20 --timeout 60) v
  local nc=(launch/netns-cluster --nodes 2 --ranks-per-node 1 --timeout 60)
  run lat-nccl 60 "${nc[@]}" -- "$exe" bench allreduce --backend nccl --device cuda "${sizes[@]}"
  run lat-nccl-delayed-acks 60 launch/netns-cluster --nodes 2 --ranks-per-node 1 --timeout 60 --delayed-acks -- \
    "$exe" bench allreduce --backend nccl --device cuda "${sizes[@]}"
  for v in LL Simple; do
    run "lat-nccl-proto-$v" 60 env NCCL_PROTO=$v "${nc[@]}" -- "$exe" bench allreduce --backend nccl --device cuda "${sizes[@]}"
  done
  run lat-nccl-1sock 60 env NCCL_SOCKET_NTHREADS=1 NCCL_NSOCKS_PERTHREAD=1 "${nc[@]}" -- \
    "$exe" bench allreduce --backend nccl --device cuda "${sizes[@]}"
  run lat-nccl-debug 60 env NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,TUNING "${nc[@]}" -- \
    "$exe" bench allreduce --backend nccl --device cuda -b 8 -e 8 -n 50 --timeout 60
  # Both "nodes" share the one GPU, whose contexts are time-sliced: with the MPS
  # daemon they run at once (round 2: 4820 us at 8 B without, 65 us with).
  if command -v nvidia-cuda-mps-control > /dev/null; then
    export CUDA_MPS_PIPE_DIRECTORY=$work/mps-pipe CUDA_MPS_LOG_DIRECTORY=$work/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
      run lat-nccl-mps 60 "${nc[@]}" -- "$exe" bench allreduce --backend nccl --device cuda "${sizes[@]}"
      echo quit | nvidia-cuda-mps-control
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
  for v in ring mpi; do
    run "lat-cpu-$v" 60 "${nc[@]}" -- "$exe" bench allreduce --backend $v --device cpu "${sizes[@]}"
  done
  local f line
  for f in "$out"/lat-*.log; do
    line=$(awk '$2 == 8 || $2 == 262144 {printf "%s B %s us; ", $2, $7}' "$f")
    note "$(basename "$f" .log)" INFO "${line:-no rows (see the log)}"
  done
}

check_train() {
  local data; data=$(fashion)
  local common=(--data "$data" --model cnn --lr 0.05 --momentum 0.9 --timeout 120)
  local epochs=8 goal=0.91 n
  # launch/gpu-pack.sh may carry only the first 40000 training images (the CPU
  # reaches 0.9163 on those with this recipe, against 0.92-0.925 on all 60000)
  n=$("$RINGTRAIN_PYTHON" -c 'import gzip,struct,sys; print(struct.unpack(">I", gzip.open(sys.argv[1]).read(8)[4:])[0])' \
    /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz 2>/dev/null || echo 0)
  [ "$n" -lt 40000 ] && goal=0.90
  [ $quick = 1 ] && epochs=2 goal=0.88
  # the recipe of tests/trainer/fashion_accuracy.sh (there: 2 CPU ranks)
  run train-acc 150 "$exe" train "${common[@]}" --device cuda --batch 128 --epochs $epochs --schedule cosine \
    --warmup 100 --logdir "$work/acc" --log-every 200
  local rc=$? acc syncs
  acc=$(metric "$work/acc" eval accuracy)
  "$RINGTRAIN_PYTHON" -c "import sys; sys.exit(0 if float('$acc') >= $goal and $rc == 0 else 1)" 2>/dev/null
  pass_if train-acc $? "accuracy $acc after $epochs epochs on $n training images (goal $goal)"
  # the non-finite guard is on by default: a steady step still waits on nothing
  syncs=$("$RINGTRAIN_PYTHON" -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
v=sorted({r["host_syncs_between_logs"] for r in rows if "host_syncs_between_logs" in r})
print(v)' "$work/acc/metrics.jsonl" 2>/dev/null || echo none)
  [ "$syncs" = "[0]" ]; pass_if train-host-syncs $? "host_syncs_between_logs over the logged steps: $syncs"
  cp "$work/acc/metrics.jsonl" "$out/train-acc-metrics.jsonl" 2>/dev/null
  # GPU against CPU after 20 steps
  run train-gpu20 60 "$exe" train "${common[@]}" --device cuda "${tf32[@]}" --batch 64 --max-steps 20 \
    --ckpt-dir "$work/g20" --logdir "$work/g20"
  run train-cpu20 60 "$exe" train "${common[@]}" --device cpu --batch 64 --max-steps 20 --ckpt-dir "$work/c20" \
    --logdir "$work/c20"
  # Each tensor within a relative L2 distance of 1e-2 (rounds 5 and 6: the
  # weight-gradient Winograd algorithm cuDNN's heuristics choose under --tf32
  # off rounds otherwise, amplified over 20 steps to 7e-4 in conv1's momentum
  # and 1.5e-3 in conv2's, while a small momentum element moved by more than
  # any elementwise rtol); a wrong gradient moves a tensor by far more. The
  # report still counts the elements outside rtol 1e-3, as in earlier rounds.
  run cmp-gpu-cpu 30 "$cmp" "$(last_ckpt "$work/g20")" "$(last_ckpt "$work/c20")" --rel-l2 1e-2 \
    --rtol 1e-3 --atol 1e-5 --report
  pass_if cmp-gpu-cpu $? "$(tail -3 "$out/cmp-gpu-cpu.log" | tr '\n' ' ')"
  # the cuDNN algorithms those 20 steps ran (FFT and Winograd ones round more than GEMMs)
  run train-gpu20-algos 60 "$exe" bench step --device cuda "${tf32[@]}" --model cnn --batch 64 \
    --steps 2 --warmup 1 --layers
  # --accum 2 --cache against the doubled batch (batch 32 and 64 may get
  # different cuDNN algorithms: the tolerance is that of GPU against CPU)
  run train-accum 60 "$exe" train "${common[@]}" --device cuda "${tf32[@]}" --batch 32 --accum 2 --cache \
    --max-steps 20 --ckpt-dir "$work/a2" --logdir "$work/a2"
  run cmp-accum 30 "$cmp" "$(last_ckpt "$work/a2")" "$work/g20/ckpt-20.h5" --rel-l2 1e-2 --rtol 1e-3 \
    --atol 1e-5 --report
  pass_if cmp-accum $? "$(tail -3 "$out/cmp-accum.log" | tr '\n' ' ')"
  # resume a GPU checkpoint on the GPU, evaluate it on the CPU
  mkdir -p "$work/g40"; cp "$work/g20/ckpt-20.h5" "$work/g40/" 2>/dev/null
  run train-resume 60 "$exe" train "${common[@]}" --device cuda --batch 64 --max-steps 40 --ckpt-dir "$work/g40" \
    --resume latest --logdir "$work/g40"
  pass_if train-resume $? "$(grep -iE 'resumed' "$out/train-resume.log" | head -1)"
  run eval-cpu 60 "$exe" eval --device cpu --data "$data" --ckpt "$work/g40/ckpt-40.h5"
  pass_if eval-cpu $? "$(grep -iE 'accuracy' "$out/eval-cpu.log" | tail -1)"
  # SIGTERM writes a checkpoint; 143: ringtrain ends with the signal's status
  mkdir -p "$work/term"
  # bounded: a run that ignored the signal must not hold the call (143 shows through)
  timeout -k 5 60 "$exe" train "${common[@]}" --device cuda --batch 64 --epochs 100 --ckpt-dir "$work/term" \
      --logdir "$work/term" > "$out/train-sigterm.log" 2>&1 &
  local pid=$!
  sleep 8; kill -TERM $pid; wait $pid; local rc3=$?
  grep -q "stopping after step" "$out/train-sigterm.log" && [ -n "$(last_ckpt "$work/term")" ] && [ $rc3 = 143 ]
  pass_if train-sigterm $? "exit $rc3, checkpoint $(basename "$(last_ckpt "$work/term")" 2>/dev/null)"
  # 2 ranks sharing the GPU (staged shm) against 1 rank with the doubled batch
  run train-share 90 "${MPI[@]}" -np 2 "$exe" train "${common[@]}" --device cuda --allow-gpu-sharing "${tf32[@]}" \
    --batch 32 --max-steps 20 --ckpt-dir "$work/s2" --logdir "$work/s2"
  run cmp-share 30 "$cmp" "$(last_ckpt "$work/s2")" "$work/g20/ckpt-20.h5" --rel-l2 1e-2 --rtol 1e-3 \
    --atol 1e-5
  pass_if cmp-share $? "$(tail -3 "$out/cmp-share.log" | tr '\n' ' ')"
  run cmp-share-accum 30 "$cmp" "$(last_ckpt "$work/s2")" "$(last_ckpt "$work/a2")" --rtol 1e-5 --atol 1e-7
  pass_if cmp-share-accum $? "$(tail -2 "$out/cmp-share-accum.log" | head -1)"
  # the same run twice: bit for bit
  run train-repeat 60 "$exe" train "${common[@]}" --device cuda "${tf32[@]}" --batch 64 --max-steps 20 \
    --ckpt-dir "$work/g20b" --logdir "$work/g20b"
  run cmp-repeat 30 "$cmp" "$work/g20/ckpt-20.h5" "$work/g20b/ckpt-20.h5" --exact
  pass_if cmp-repeat $? "$(tail -2 "$out/cmp-repeat.log" | head -1)"
}

check_sanitize() {
  # A small synthetic set: the sanitizers slow kernels 10-100x, and the final
  # evaluation would otherwise cover 10000 samples.
  local data=$work/small.h5 tool
  "$exe" convert synthetic --n 2048 --test-n 101 --shape 1,28,28 --classes 10 --seed 3 -o "$data" > /dev/null
  # NCCL probes its own kernels with cudaFuncGetAttributes at start-up, which
  # memcheck reports as API errors (no kernel image for this GPU): not ours, so
  # API errors are not reported; memory and race errors in kernels are.
  local api=(--report-api-errors no)
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    # racecheck slows a step far more than memcheck (resnet20's 20 steps ran past
    # 240 s in round 3): every kernel is launched in the first steps already
    local steps=20 rbatch=32
    [ "$tool" = racecheck ] && steps=3 rbatch=8
    run "san-ops-$tool" 90 compute-sanitizer --tool "$tool" --error-exitcode 9 build/tests/model/gpu_ops_test
    pass_if "san-ops-$tool" $? "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-ops-$tool.log" | tail -1)"
    run "san-train-$tool" 240 compute-sanitizer --tool "$tool" "${api[@]}" --error-exitcode 9 "$exe" train \
      --data "$data" --model cnn --device cuda --batch 64 --max-steps $steps --timeout 100
    pass_if "san-train-$tool" $? "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-train-$tool.log" | tail -1)"
    # a residual BatchNorm model (add, BN kernels, global pool), small input
    run "san-resnet-$tool" 240 compute-sanitizer --tool "$tool" "${api[@]}" --error-exitcode 9 "$exe" train \
      --data "$data" --model resnet20 --device cuda --batch $rbatch --max-steps $steps --timeout 100
    pass_if "san-resnet-$tool" $? "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-resnet-$tool.log" | tail -1)"
    # --precision bf16's tensor-core path: the 16-bit casts into the context's
    # scratch and the 16-bit cuDNN/cuBLAS calls, op by op and in a model (NHWC)
    run "san-tc-$tool" 120 compute-sanitizer --tool "$tool" --error-exitcode 9 build/tests/model/gpu_tensor_core_test
    pass_if "san-tc-$tool" $? "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-tc-$tool.log" | tail -1)"
    run "san-resnet-bf16-$tool" 240 compute-sanitizer --tool "$tool" "${api[@]}" --error-exitcode 9 "$exe" train \
      --data "$data" --model resnet20 --device cuda --batch $rbatch --max-steps $steps --timeout 100 --precision bf16
    pass_if "san-resnet-bf16-$tool" $? "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-resnet-bf16-$tool.log" | tail -1)"
  done
}

check_speed() {
  if [ -f launch/bench/peer_gpu_step.py ]; then
    # PyTorch brings its own cuDNN: it must not see the CUDA library folders
    # that ringtrain's LD_LIBRARY_PATH names; ringtrain keeps them (a wrapper).
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "${LD_LIBRARY_PATH:-}" "$exe" > "$work/ringtrain"
    chmod +x "$work/ringtrain"
    run speed-peer 150 env LD_LIBRARY_PATH="$(torch_library_path)" PYTHONUNBUFFERED=1 "$RINGTRAIN_PYTHON" \
      launch/bench/peer_gpu_step.py --ringtrain "$work/ringtrain" --repeats 3
    pass_if speed-peer $? "$(grep -cE '^ *(cnn|mlp)' "$out/speed-peer.log") rows"
  fi
  run speed-nccl1 60 "$exe" bench allreduce --backend nccl --device cuda -b 8 -e 1G -f 4 -n 20
  pass_if speed-nccl1 $? "$(awk '$2 == 536870912 {print "512 MiB: algbw " $8 " GB/s"}' "$out/speed-nccl1.log")"
}

torch_library_path() {
  tr ':' '\n' <<< "${LD_LIBRARY_PATH:-}" | grep -vE '^/usr/lib/x86_64-linux-gnu$|cuda' | paste -sd:
}
# The folder of the cuDNN that PyTorch's wheel carries (nvidia-cudnn-cu*), if any
torch_cudnn=$(LD_LIBRARY_PATH=$(torch_library_path) "$RINGTRAIN_PYTHON" -c \
  'import os, nvidia.cudnn as c; d = os.path.join(list(c.__path__)[0], "lib"); print(d if os.path.isdir(d) else "")' \
  2>/dev/null)

# The models cases, model:batch:precision[:layout]: the issue's goal table first
# (a cut-off call keeps those), then the TF32 rows, fp32 and bf16 NCHW.
models_cases=${MODELS_CASES:-resnet50:256:bf16 resnet50:256:tf32 inception3:128:bf16 vgg16:128:bf16 inception3:128:tf32 vgg16:128:tf32 resnet50:256:fp32:nhwc resnet50:256:bf16:nchw}

# models_case CASE: sets model batch prec layout shape tf32 precision from
# model:batch:precision[:layout] (sets tf32_mode too; prec tf32: fp32 storage with TF32 on)
models_case() {
  IFS=: read -r model batch prec layout <<< "$1"
  layout=${layout:-auto}
  shape=3,224,224; [ "$model" = inception3 ] && shape=3,299,299
  tf32_mode=off; [ "$prec" = tf32 ] && tf32_mode=on
  # bf16/fp16: ringtrain's --precision (16-bit storage) against PyTorch's
  # autocast with channels_last.
  precision=fp32
  case $prec in bf16|fp16) precision=$prec; tf32_mode=on ;; esac
}

# ringtrain's cuDNN: PyTorch's where there is one, so that both sides run on one
# cuDNN (the host's libcudnn.so.9, 9.14 on 2026-11-26, is older than the one
# PyTorch carries, 9.19, and cuDNN's heuristics change between versions);
# MODELS_SAME_CUDNN=0: the host's. Sets rt_env, a prefix for ringtrain's runs.
rt_env=()
ringtrain_cudnn_env() {
  rt_env=()
  if [ "${MODELS_SAME_CUDNN:-1}" = 1 ] && [ -n "$torch_cudnn" ]; then
    rt_env=(env LD_LIBRARY_PATH="$torch_cudnn:${LD_LIBRARY_PATH:-}")
  fi
}

# median_table TSV KEYS VALUES OUT: per group of rows (the KEYS columns), the
# median of each VALUES column over the rounds that have one, and the ratio of
# the first two medians (ringtrain / PyTorch), into OUT and on stdout.
median_table() {
  "$RINGTRAIN_PYTHON" - "$@" <<'PY'
import statistics, sys
path, keys, values, out = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4]
rows = [l.rstrip("\n").split("\t") for l in open(path) if l.strip()]
head, rows = rows[0], rows[1:]
col = {name: i for i, name in enumerate(head)}
groups = {}
for r in rows:
    groups.setdefault(tuple(r[col[k]] for k in keys), []).append(r)
def num(v):
    try:
        return float(v.rstrip("%"))
    except ValueError:
        return None
lines = ["\t".join(keys + ["rounds"] + ["median_" + v for v in values] + ["ratio"])]
for key, rs in groups.items():
    meds = []
    for v in values:
        xs = [x for x in (num(r[col[v]]) for r in rs) if x is not None]
        meds.append(statistics.median(xs) if xs else None)
    ratio = "%.2fx" % (meds[0] / meds[1]) if meds[0] and meds[1] else "n/a"
    lines.append("\t".join(list(key) + [str(len(rs))] +
                           ["failed" if m is None else "%.1f" % m for m in meds] + [ratio]))
open(out, "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
PY
}

# One round of a models case, each side: sets rt (samples/s and host syncs),
# rt_mib, pt, pt_mib (check_models' locals).
models_rt() {
  local log=models-rt-$model-$prec-$layout-$r
  run "$log" 150 "${rt_env[@]}" "$exe" bench step --device cuda --model "$model" --input "$shape" \
    --classes 1000 --batch "$batch" --steps 10 --warmup 3 --tf32 "$tf32_mode" --precision "$precision" \
    --layout "$layout" --json
  rt=$("$RINGTRAIN_PYTHON" -c 'import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"): j=json.loads(l); print(round(j["samples_per_s"],1), j.get("host_syncs_per_step"))' \
    "$out/$log.log" 2>/dev/null | tail -1)
  rt_mib=$("$RINGTRAIN_PYTHON" -c 'import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"): j=json.loads(l); print(round((j.get("device_memory_peak_bytes") or 0)/2**20))' \
    "$out/$log.log" 2>/dev/null | tail -1)
  # What the peak is made of (a case's first round): the largest allocations
  # live then, beside the plan's figures (planned_bytes).
  [ "$r" = 1 ] && [ -n "$rt_mib" ] && note models-peak INFO "$model $prec $layout: $("$RINGTRAIN_PYTHON" -c 'import json,sys
for l in open(sys.argv[1]):
    if l.startswith("{"):
        j=json.loads(l); p=j.get("planned_bytes") or {}
        print("peak %s MiB; largest allocations then %s MiB; planned: activations %d, workspace %d, weights %d, gradients %d, optimizer %d MiB" % (
            round((j.get("device_memory_peak_bytes") or 0)/2**20),
            ", ".join(str(round(b/2**20)) for b in (j.get("device_memory_peak_largest_bytes") or [])),
            *(round((p.get(k) or 0)/2**20) for k in ("activations","workspace","weights","gradients","optimizer_state"))))' \
    "$out/$log.log" 2>/dev/null | tail -1)"
  return 0
}
models_pt() {
  local log=models-pt-$model-$prec-$layout-$r
  run "$log" 150 env LD_LIBRARY_PATH="$(torch_library_path)" PYTHONUNBUFFERED=1 "$RINGTRAIN_PYTHON" \
    launch/bench/peer_gpu_models.py --cases "$model@$batch:$prec" --steps 10 --warmup 3 --repeats 1
  pt=$(awk '/samples\/s/ {print $5}' "$out/$log.log" | tail -1)
  pt_mib=$(sed -n 's/.*peak \([0-9]*\) MiB.*/\1/p' "$out/$log.log" | tail -1)
}

check_models() {
  # ringtrain and PyTorch (peer_gpu_models.py) in turn, one case at a time,
  # MODELS_ROUNDS rounds, the first side alternating; each side's samples/s
  # goes into models.tsv, and after every round the medians into
  # models-table.txt (and the tarball): a call cut off by its budget keeps
  # the rounds it finished. models_why explains the cases behind.
  ringtrain_cudnn_env
  echo "# ringtrain's cuDNN: ${rt_env[*]:-from the host}; PyTorch's: ${torch_cudnn:-its own}" > "$out/models-cudnn.txt"
  local rounds=${MODELS_ROUNDS:-3} c model batch prec layout shape tf32_mode precision r rt pt rt_mib pt_mib
  # Peak device memory of each side in MiB: ringtrain's own allocations
  # (device_memory_peak_bytes) against torch.cuda.max_memory_allocated.
  printf 'model\tbatch\tprecision\tlayout\tround\tringtrain\tpytorch\tringtrain_peak_mib\tpytorch_peak_mib\tringtrain_host_syncs\n' > "$out/models.tsv"
  # model:batch:precision[:layout]; the layout is ringtrain's --layout (auto:
  # nhwc where the convolutions run on tensor cores: bf16/fp16 or TF32 on the
  # GPU), PyTorch runs channels_last always: the fp32 case names nhwc to match,
  # the nchw cases measure ringtrain's other layout against the same peer.
  # The issue's table first (a cut-off call keeps those), then fp32 and bf16 NCHW.
  for c in $models_cases; do
    models_case "$c"
    for r in $(seq 1 "$rounds"); do
      rt='' pt='' rt_mib='' pt_mib=''
      # Alternating: a drift of the machine (clocks, another tenant) bends
      # neither side alone.
      if [ $((r % 2)) = 1 ]; then models_rt; models_pt; else models_pt; models_rt; fi
      # rt is "samples/s host-syncs-per-step": one column each
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$model" "$batch" "$prec" "$layout" "$r" "$(rt_sps=${rt%% *}; echo "${rt_sps:-failed}")" "${pt:-failed}" \
        "${rt_mib:-?}" "${pt_mib:-?}" "$( [ -n "$rt" ] && echo "${rt#* }" || echo '?')" >> "$out/models.tsv"
      echo "models: $(tail -1 "$out/models.tsv" | tr '\t' ' ')"
      median_table "$out/models.tsv" model,batch,precision,layout ringtrain,pytorch,ringtrain_peak_mib,pytorch_peak_mib \
        "$out/models-table.txt" > /dev/null
      pack
      # Below a quarter of PyTorch's speed one round says it (bf16 NCHW on an
      # H100, 2026-11-26: 117 against 3990 samples/s, 53 s a round): the
      # budget goes to the other cases and to the layer profile instead.
      "$RINGTRAIN_PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 0.25 * float(sys.argv[2]) else 1)' \
        "${rt%% *}" "$pt" 2>/dev/null && break
    done
  done
  local row
  while IFS= read -r row; do note models-table INFO "$row"; done < "$out/models-table.txt"
  # Which kind of engine won each timed weight gradient (conv-times.tsv:
  # "<key>\t<chosen>\t<candidates>"): cuDNN's graph engines or ringtrain's GEMMs;
  # and the candidates whose dW missed the trial pattern's sums (" wrong: "),
  # which the timing passed over: each is a bug (ringtrain's GEMM, or cuDNN's).
  if [ -s "$RINGTRAIN_CONV_TIMES" ]; then
    note models-wgrad INFO "$(awk -F'\t' '$1 ~ /wgrad/ { n++; if ($2 ~ /^cublasLt-/) g++; else if ($2 != "none") c++
        if ($2 ~ /^cublasLt-unfolded/) u++ }
      END { printf "timed weight gradients: %d, won by ringtrain GEMMs: %d (the unfolded input: %d, shifted rows: %d), by cuDNN engines: %d", n, g, u, g - u, c }' \
      "$RINGTRAIN_CONV_TIMES")"
    # Candidates that threw in the timing (" failed: "; cuBLASLt's "no
    # algorithm" for a GEMM not sure to have one is expected): passed over.
    local failed
    failed=$(awk -F'\t' '$1 ~ /wgrad/ { k = split($3, c, "; ");
        for (i = 1; i <= k; i++) if (c[i] ~ / failed: /) { n = c[i]; sub(/ -?[0-9.]+ ms .*/, "", n); print n } }' \
      "$RINGTRAIN_CONV_TIMES" | sort | uniq -c | awk '{ n = $1; sub(/^ *[0-9]+ /, ""); printf "%s%s x%d", (NR > 1 ? ", " : ""), $0, n }')
    [ -n "$failed" ] && note models-wgrad-failed INFO "candidates that failed to run (passed over; conv-times.tsv says why): $failed"
    local wrong
    wrong=$(awk -F'\t' '$1 ~ /wgrad/ { k = split($3, c, "; ");
        for (i = 1; i <= k; i++) if (c[i] ~ / wrong: /) { n = c[i]; sub(/ -?[0-9.]+ ms .*/, "", n); print n } }' \
      "$RINGTRAIN_CONV_TIMES" | sort | uniq -c | awk '{ n = $1; sub(/^ *[0-9]+ /, ""); printf "%s%s x%d", (NR > 1 ? ", " : ""), $0, n }')
    if [ -n "$wrong" ]; then
      note models-wgrad-wrong FAIL "candidates whose dW missed the spot check (passed over; conv-times.tsv): $wrong"
    else
      note models-wgrad-wrong PASS "every timed weight-gradient candidate's dW held the trial pattern's sums"
    fi
  fi
}

check_models_why() {
  # For each case behind PyTorch in models-table.txt (every case of
  # MODELS_CASES in a dry run, so that these runs' flags are checked too):
  # the time per layer, one run as a CUDA graph, one with the convolutions'
  # engines untimed (RINGTRAIN_CONV_TUNE=off).
  ringtrain_cudnn_env
  local c model batch prec layout shape tf32_mode precision behind=()
  if [ $dry = 1 ]; then
    for c in $models_cases; do models_case "$c"; behind+=("$model:$batch:$prec:$layout"); done
  elif [ -f "$out/models-table.txt" ]; then
    while IFS=$'\t' read -r model batch prec layout _ _ _ _ _ ratio; do
      case $ratio in ratio|n/a) continue ;; esac
      "$RINGTRAIN_PYTHON" -c 'import sys; sys.exit(0 if float(sys.argv[1].rstrip("x")) < 1.0 else 1)' "$ratio" \
        && behind+=("$model:$batch:$prec:$layout")
    done < "$out/models-table.txt"
  fi
  [ ${#behind[@]} -gt 0 ] || { note models_why INFO "no case behind PyTorch (or no models-table.txt)"; return; }
  for c in "${behind[@]}"; do
    models_case "$c"
    # The time per layer (and cuDNN's engines and algorithms).
    run "models-layers-$model-$prec-$layout" 150 "${rt_env[@]}" "$exe" bench step --device cuda --model "$model" --input "$shape" \
      --classes 1000 --batch "$batch" --steps 3 --warmup 3 --tf32 "$tf32_mode" --precision "$precision" \
      --layout "$layout" --layers
    pack
  done
  for c in "${behind[@]}"; do
    models_case "$c"
    # Once with the forward and backward as one CUDA graph (--cuda-graph on),
    # which bench step refuses for a model that draws dropout masks.
    case $model in
      inception3|vgg16) note models-cuda-graph SKIP "$model draws dropout masks (no --cuda-graph)" ;;
      *)
        run "models-rt-graph-$model-$prec-$layout" 150 "${rt_env[@]}" "$exe" bench step --device cuda --model "$model" \
          --input "$shape" --classes 1000 --batch "$batch" --steps 10 --warmup 3 --tf32 "$tf32_mode" \
          --precision "$precision" --layout "$layout" --cuda-graph on --json
        note models-cuda-graph INFO "$model $prec $layout: $(grep -o '"samples_per_s":[0-9.]*' "$out/models-rt-graph-$model-$prec-$layout.log" | tail -1) with --cuda-graph on; without: see models-table.txt" ;;
    esac
    # The stored convolutions take graph-API engines chosen by time (and
    # remembered in $RINGTRAIN_CONV_CACHE); once with the heuristics' first
    # engines, untimed (round 7's choice; the legacy API ran at its speed), to
    # say what the timing gains where ringtrain is behind.
    case $prec in bf16|fp16)
      run "models-rt-untimed-$model-$prec-$layout" 150 env RINGTRAIN_CONV_TUNE=off "${rt_env[@]}" "$exe" bench step \
        --device cuda --model "$model" --input "$shape" --classes 1000 --batch "$batch" --steps 10 --warmup 3 \
        --tf32 "$tf32_mode" --precision "$precision" --layout "$layout" --json
      note models-conv-choice INFO "$model $prec $layout: heuristics' first engines (RINGTRAIN_CONV_TUNE=off) $(grep -o '"samples_per_s":[0-9.]*' "$out/models-rt-untimed-$model-$prec-$layout.log" | tail -1); timed: see models-table.txt" ;;
    esac
    pack
  done
}

check_loader() {
  # The loader against the model: resnet50 bf16 trained from a class-folder tree
  # of JPEG photographs of ImageNet-like sizes (launch/bench/make_jpeg_tree.py,
  # stored as JPEG bytes and decoded on the loader threads) with --augment
  # imagenet and one loader thread per spare core, against the same model on the
  # same images decoded once into raw 224 x 224 samples held in memory (--cache,
  # no augmentation): images/s of each and the data wait's share of the step.
  # LOADER_* change the sizes (a CPU rehearsal: LOADER_DEVICE=cpu).
  local dev=${LOADER_DEVICE:-cuda} model=${LOADER_MODEL:-resnet50} batch=${LOADER_BATCH:-256}
  local steps=${LOADER_STEPS:-60} classes=${LOADER_CLASSES:-10} per=${LOADER_PER_CLASS:-500}
  local threads=${LOADER_THREADS:-$(($(nproc) > 1 ? $(nproc) - 1 : 1))} tree=$work/jpeg-tree kind
  run loader-tree 240 "$RINGTRAIN_PYTHON" launch/bench/make_jpeg_tree.py "$tree" --classes "$classes" --per-class "$per"
  run loader-convert-jpeg 240 "$exe" convert images --train "$tree" --store jpeg --test-fraction 0.05 \
    -o "$work/jpeg.h5" --force --no-progress
  run loader-convert-raw 240 "$exe" convert images --train "$tree" --size 224 --store raw --test-fraction 0.05 \
    -o "$work/raw224.h5" --force --no-progress
  local common=(--device "$dev" --model "$model" --batch "$batch" --max-steps "$steps" --precision bf16
    --log-every 5 --timeout 300 --lr 0.01 --nonfinite skip:1000)
  run loader-train-jpeg 300 "$exe" train --data "$work/jpeg.h5" "${common[@]}" --augment imagenet \
    --loader-threads "$threads" --logdir "$work/log-jpeg"
  local rc_jpeg=$?
  run loader-train-raw 300 "$exe" train --data "$work/raw224.h5" "${common[@]}" --cache --logdir "$work/log-raw"
  local rc_raw=$?
  # The loader alone, no model: what decoding and augmenting deliver with
  # those threads. Round 7's JPEG run gave the raw run's images/s with a data
  # wait of 0.73 of the step: the host, having queued the step's kernels,
  # waits for the next batch while the GPU computes, and the loader refills a
  # slot only when the GPU has read it, so the wait share measures the GPU's
  # backpressure as much as the loader. Whether decoding keeps up is this
  # rate against the model's images/s.
  run loader-alone 200 "$exe" bench data --data "$work/jpeg.h5" --batch "$batch" --steps 20 \
    --repeat 1 --cache off --augment imagenet --loader-threads "$threads"
  printf 'input\timages_per_s\tdata_wait_share\tstep_ms\n' > "$out/loader.tsv"
  for kind in jpeg raw; do
    # The steady steps: the rows after the first two logging windows.
    "$RINGTRAIN_PYTHON" - "$work/log-$kind/metrics.jsonl" "$kind" >> "$out/loader.tsv" <<'PY' 2>/dev/null \
      || printf '%s\tfailed\tfailed\tfailed\n' "$kind" >> "$out/loader.tsv"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
rows = [r for r in rows if r.get("kind") == "train"][2:]
share = statistics.median(r["data_wait_s"] / r["step_s"] for r in rows)
print("%s\t%.0f\t%.2f\t%.1f" % (sys.argv[2], statistics.median(r["samples_per_s"] for r in rows), share,
                                1e3 * statistics.median(r["window_step_s"] for r in rows)))
PY
  done
  cp "$work/log-jpeg/metrics.jsonl" "$out/loader-jpeg-metrics.jsonl" 2>/dev/null
  [ $rc_jpeg = 0 ] && [ $rc_raw = 0 ]
  pass_if loader $? "$threads loader threads, $(grep -m1 'KiB on average' "$out/loader-tree.log"): $(tail -n +2 "$out/loader.tsv" | tr '\t\n' ' ;') loader alone (source, threads, images/s per rank, per thread, in total): $(tail -1 "$out/loader-alone.log")"
}

check_kernels() {
  # Kernel by kernel, each side's kernel times summed per kernel name, the
  # heaviest first: ringtrain's one steady step under ncu (bench step marks its
  # timed steps for --profile-from-start off; launch/ncu_kernel_table.py),
  # PyTorch's two steps under torch.profiler (peer_gpu_models.py --kernel-table,
  # the same table): in round 6 ncu over PyTorch's resnet50 did not finish in 119 s.
  # Named explicitly, not in the default list: ncu serialises every launch, so
  # only the table's shares mean anything, not its step time. KERNELS_CASES:
  # model:batch:precision ... (KERNELS_CASE, one of them, as before).
  local tp; tp=$(torch_library_path)
  local case model batch prec shape tf32_mode precision tag
  for case in ${KERNELS_CASES:-${KERNELS_CASE:-resnet50:256:bf16}}; do
    IFS=: read -r model batch prec <<< "$case"
    shape=3,224,224; [ "$model" = inception3 ] && shape=3,299,299
    precision=$prec; [ "$prec" = tf32 ] && precision=fp32
    tf32_mode=on; [ "$prec" = fp32 ] && tf32_mode=off
    tag=$model-$batch-$prec
    # One step on each side, so that the tables' milliseconds compare too.
    run "kernels-pt-$tag" 120 env LD_LIBRARY_PATH="$tp" "$RINGTRAIN_PYTHON" launch/bench/peer_gpu_models.py \
      --cases "$model@$batch:$prec" --steps 1 --warmup 3 --repeats 1 --kernel-table "$out/kernels-pt-$tag.txt"
    pass_if "kernels-pt-$tag" $? "$(tail -1 "$out/kernels-pt-$tag.txt" 2>/dev/null)"
    # The GPU's clocks as they are (ncu would lock them at base) and its caches
    # warm, as under torch.profiler (ncu would flush them before each kernel).
    local ncu=(ncu --profile-from-start off --clock-control none --cache-control none
      --metrics gpu__time_duration.sum --csv --page raw)
    run "kernels-rt-$tag" 180 "${ncu[@]}" "$exe" bench step --device cuda --model "$model" --input "$shape" \
      --classes 1000 --batch "$batch" --steps 1 --warmup 2 --tf32 $tf32_mode --precision "$precision"
    "$RINGTRAIN_PYTHON" launch/ncu_kernel_table.py "$out/kernels-rt-$tag.log" > "$out/kernels-rt-$tag.txt" 2>&1
    pass_if "kernels-rt-$tag" $? "$(tail -1 "$out/kernels-rt-$tag.txt")"
  done
}

check_peers() {
  run peers 150 env LD_LIBRARY_PATH="$(torch_library_path)" PYTHONUNBUFFERED=1 "$RINGTRAIN_PYTHON" \
    launch/bench/peer_gpu_models.py --json "$out/peers.json"
  pass_if peers $? "$(grep -cE '^(resnet50|inception3|vgg16|gpt2) ' "$out/peers.log") rows"
}

# One round of gpt, each side: sets rt and pt (check_gpt's locals).
gpt_rt() {
  run "gpt-rt-$r" 240 "${rt_env[@]}" "$exe" bench step --device cuda --model gpt2:dropout=0 --batch 16 --steps 5 \
    --warmup 2 --precision bf16 --tf32 on --optimizer adamw --json
  rt=$("$RINGTRAIN_PYTHON" - "$out/gpt-rt-$r.log" "$gpu" <<'PY' 2>/dev/null
import json, sys
peak = next((v for k, v in {"H100": 989.0, "H200": 989.0, "A100": 312.0}.items() if k in sys.argv[2]), None)
j = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")][-1]
tokens = j["samples_per_s"] * 1024
flops = tokens * (6 * j["params"] + 6 * 12 * 1024 * 768)
mfu = "%.1f%%" % (100 * flops / 1e12 / peak) if peak else "n/a"
# which attention ran: cuDNN's SDPA (its engine), or a fallback and why
parts = [p.strip() for p in (j.get("attention") or "none").split(";")]
attention = " / ".join([parts[0][:60]] + [p[:100] for p in parts[1:] if "does not run" in p])
print("%.0f\t%s\t%s\t%.0f\t%s" % (tokens, mfu, j.get("host_syncs_per_step"), (j.get("device_memory_peak_bytes") or 0) / 2**20, attention))
PY
)
}
gpt_pt() {
  run "gpt-pt-$r" 240 env LD_LIBRARY_PATH="$(torch_library_path)" PYTHONUNBUFFERED=1 "$RINGTRAIN_PYTHON" \
    launch/bench/peer_gpu_models.py --cases gpt2@16:bf16 --steps 5 --warmup 2 --repeats 1 --json "$work/gpt-pt-$r.json"
  pt=$("$RINGTRAIN_PYTHON" - "$work/gpt-pt-$r.json" "$gpu" <<'PY' 2>/dev/null
import json, sys
peak = next((v for k, v in {"H100": 989.0, "H200": 989.0, "A100": 312.0}.items() if k in sys.argv[2]), None)
[j] = json.load(open(sys.argv[1]))
mfu = "%.1f%%" % (100 * j["tflops"] / peak) if peak else "n/a"
print("%.0f\t%s\t%.0f" % (j["tokens_per_s"], mfu, j.get("max_memory_allocated", 0) / 2**20))
PY
)
}

check_gpt() {
  # Both sides without dropout (the peer's gpt2 has none: gpt2:dropout=0), AdamW,
  # bf16 (ringtrain: its --precision bf16 rounding around TF32 GEMMs), on one
  # cuDNN (ringtrain_cudnn_env), the first side alternating. The FLOPs per step
  # are peer_gpu_models.py's: 6 N per token plus causal attention's 6 L T C.
  # After every round the medians go into gpt-table.txt (and the tarball).
  ringtrain_cudnn_env
  local rounds=${GPT_ROUNDS:-2} r rt pt gpu rt_tok rt_mfu rt_syncs rt_mib rt_att pt_tok pt_mfu pt_mib
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
  printf 'model\tround\tringtrain_tokens_s\tpytorch_tokens_s\tringtrain_mfu\tpytorch_mfu\tringtrain_peak_mib\tpytorch_peak_mib\thost_syncs\tringtrain_attention\n' > "$out/gpt.tsv"
  for r in $(seq 1 "$rounds"); do
    rt='' pt=''
    if [ $((r % 2)) = 1 ]; then gpt_rt; gpt_pt; else gpt_pt; gpt_rt; fi
    [ -n "$rt" ] || rt=$(printf 'failed\tfailed\tfailed\tfailed\tfailed')
    [ -n "$pt" ] || pt=$(printf 'failed\tfailed\tfailed')
    IFS=$'\t' read -r rt_tok rt_mfu rt_syncs rt_mib rt_att <<< "$rt"
    IFS=$'\t' read -r pt_tok pt_mfu pt_mib <<< "$pt"
    printf 'gpt2:16x1024:bf16\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$rt_tok" "$pt_tok" "$rt_mfu" "$pt_mfu" \
      "$rt_mib" "$pt_mib" "$rt_syncs" "$rt_att" >> "$out/gpt.tsv"
    echo "gpt: $(tail -1 "$out/gpt.tsv" | tr '\t' ' ')"
    median_table "$out/gpt.tsv" model ringtrain_tokens_s,pytorch_tokens_s,ringtrain_mfu,pytorch_mfu,ringtrain_peak_mib,pytorch_peak_mib \
      "$out/gpt-table.txt" > /dev/null
    pack
  done
  note gpt INFO "$gpu: $(tr '\n' ';' < "$out/gpt-table.txt" | cut -c1-600)"
}

check_gpt_why() {
  ringtrain_cudnn_env
  local base=(bench step --device cuda --model gpt2:dropout=0 --batch 16 --warmup 2 --precision bf16 --tf32 on
    --optimizer adamw)
  # The rounds run the default (bf16 without dropout: cuDNN's SDPA); once more
  # with round 6's default, the unfused path (cuBLAS batched GEMMs around a causal
  # softmax), which is what attention dropout or a shape without a cuDNN engine gets.
  run gpt-rt-unfused 240 env RINGTRAIN_ATTENTION=unfused "${rt_env[@]}" "$exe" "${base[@]}" --steps 5 --json
  note gpt-unfused INFO "$(grep -o '"samples_per_s":[0-9.]*' "$out/gpt-rt-unfused.log" | tail -1) (x 1024 tokens)"
  pack
  # Once with the forward and backward replayed as one CUDA graph (bench step
  # --cuda-graph on: one launch a step instead of one per kernel), to say whether
  # it is faster than the rounds and should become the default.
  run gpt-rt-graph 240 "${rt_env[@]}" "$exe" "${base[@]}" --steps 5 --cuda-graph on --json
  note gpt-cuda-graph INFO "$(grep -o '"samples_per_s":[0-9.]*\|"cuda_graph_nodes":[0-9]*' "$out/gpt-rt-graph.log" | tr '\n' ' ') (x 1024 tokens)"
  pack
  # Once with --fuse off (no GELU epilogues, no residual + LayerNorm): cuBLASLt
  # has been seen to choose slower kernels for its GELU epilogues in bf16, so the
  # fused default must measure faster than the unfused pair to stay.
  run gpt-rt-nofuse 240 "${rt_env[@]}" "$exe" "${base[@]}" --steps 5 --fuse off --json
  note gpt-fuse-off INFO "$(grep -o '"samples_per_s":[0-9.]*' "$out/gpt-rt-nofuse.log" | tail -1) (x 1024 tokens)"
  pack
  run gpt-layers 150 "${rt_env[@]}" "$exe" "${base[@]}" --steps 3 --layers
}

# The GPU bundle stores a library's SONAME link where Debian's merged /usr has it
# (lib/...) and its target under usr/lib/...: ldconfig -n makes the links beside
# the targets (iproute2's libbpf.so.1, without which netns-cluster cannot run);
# gnuplot is an alternatives link the bundle does not carry. The bundle's PMIx
# looks for its plugins at Debian's absolute path, where a GPU host may have
# another PMIx's: they fail to load and say so on every process's stderr, which
# fails the tests that read a one-line error (2026-11-26); point it at its own.
bundle_fixups() {
  local d
  for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }}; do
    case $d in /tmp/ringtrain-gpu/*) [ -d "$d" ] && ldconfig -n "$d" 2>/dev/null ;; esac
    case $d in /tmp/ringtrain-gpu/*) [ -d "$d/pmix2/lib/pmix" ] &&
      export PMIX_MCA_mca_base_component_path=$d/pmix2/lib/pmix ;; esac
  done
  if ! command -v gnuplot > /dev/null && command -v gnuplot-nox > /dev/null; then
    ln -s "$(command -v gnuplot-nox)" "$(dirname "$(command -v gnuplot-nox)")/gnuplot"
  fi
  ip netns list > /dev/null 2>&1 || note bundle FAIL "ip netns does not work: $(ip netns list 2>&1 | head -1)"
}

# GNU tar exits 1 where a file changed while it read it (a background check's
# log): the archive is still whole, so it replaces the last one all the same.
pack() {
  [ -n "$tarball" ] || return 0
  tar --warning=no-file-changed -czf "$tarball.tmp" -C "$out" . 2>/dev/null
  [ $? -le 1 ] && mv "$tarball.tmp" "$tarball"
  local stem=${tarball%.tgz} f src
  stem=${stem%.tar.gz}
  for f in summary models gpt; do
    src=$out/$f-table.txt; [ $f = summary ] && src=$summary
    [ -f "$src" ] && cp "$src" "$stem-$f.txt.tmp" && mv "$stem-$f.txt.tmp" "$stem-$f.txt"
  done
  return 0
}

[ $dry = 0 ] && bundle_fixups
note start INFO "$(date -u +%FT%TZ) checks: ${checks[*]}; budget $budget s; quick $quick; dry $dry;" \
  "packed from $( [ -s build/gpu-pack-source.txt ] && cat build/gpu-pack-source.txt || echo 'an unknown commit')," \
  "gpu-checks.sh $(sha1sum "$root/launch/gpu-checks.sh" | cut -c1-12)"
for c in "${checks[@]}"; do
  declare -F "check_$c" > /dev/null || { note "$c" FAIL "no such check"; continue; }
  case $c in latency|speed|gpt|gpt_why|models|models_why|peers|kernels|loader) wait_background ;; esac
  if [ "$(left)" -lt 25 ]; then note "$c" SKIP "budget spent"; continue; fi
  case $c in cpusuite|sanitize) background "$c"; continue ;; esac
  t0=$SECONDS
  echo "=== $c ($(date +%T), $(left) s left)" | tee -a "$summary"
  "check_$c"
  echo "=== $c took $((SECONDS - t0)) s" | tee -a "$summary"
  pack
done
wait_background
rm -rf "$work"
tally() { tail -n "+$summary_from" "$summary" | awk -v s="$1" '$2 == s' | wc -l; }
echo "=== done ($(date +%T)): $(tally PASS) PASS, $(tally FAIL) FAIL, $(tally SKIP) SKIP, $(tally BADFLAGS) BADFLAGS" | tee -a "$summary"
pack
