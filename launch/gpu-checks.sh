#!/usr/bin/env bash
# gpu-checks.sh OUTDIR [CHECK...]: the GPU checklist, run on a machine with a GPU
# from a CUDA build in build/ (the device tool's `bash .gpu/run.sh` unpacks one).
# Each check runs under a time limit, writes OUTDIR/<check>.log, and adds a line
# "<check> PASS|FAIL|INFO <detail>" to OUTDIR/summary.txt; a failing check does
# not stop the others. With no CHECK names, all run in the order below.
#   env       nvidia-smi, library versions, ringtrain info --device cuda
#   ctest     ctest -L gpu (every gpu test must pass, none skip)
#   nccl2     2 NCCL ranks on one GPU as 2 nodes of launch/netns-cluster: every
#             dtype and op, a rank killed with SIGKILL, a rank that never joins
#   train     cnn on Fashion-MNIST to >= 0.91; GPU vs CPU after 20 steps; accum 2
#             --cache vs the doubled batch; resume on GPU, eval on CPU; SIGTERM;
#             2 ranks sharing the GPU vs 1 rank with the doubled batch
#   sanitize  compute-sanitizer memcheck and racecheck: gpu_ops_test, 20 steps
#   speed     bench step vs launch/bench/peer_gpu_step.py; bench allreduce nccl
set -uo pipefail
out=${1:?usage: gpu-checks.sh OUTDIR [CHECK...]}
shift
mkdir -p "$out"
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2
# shellcheck source=launch/env.sh
source launch/env.sh
exe=$root/build/ringtrain
cmp=$root/build/tests/trainer/compare_checkpoints
work=$(mktemp -d /tmp/gpu-checks.XXXXXX)
summary=$out/summary.txt
checks=("$@")
[ ${#checks[@]} -eq 0 ] && checks=(env ctest nccl2 train sanitize speed)

note() { echo "$1 $2 ${*:3}" | tee -a "$summary"; }
# run NAME LIMIT CMD...: one step, its log, its exit status
run() {
  local name=$1 limit=$2
  shift 2
  echo "+ $*" > "$out/$name.log"
  timeout -k 10 "$limit" "$@" >> "$out/$name.log" 2>&1
  local rc=$?
  echo "exit $rc" >> "$out/$name.log"
  return $rc
}
pass_if() { if [ "$2" = 0 ]; then note "$1" PASS "${@:3}"; else note "$1" FAIL "exit $2 ${*:3}"; fi; }
last_ckpt() { find "$1" -maxdepth 1 -name 'ckpt-*.h5' 2>/dev/null | sort -V | tail -1; }
accuracy() {
  python3 -c 'import json,sys
rows=[json.loads(l) for l in open(sys.argv[1]) if l.strip()]
print([r for r in rows if r.get("kind")=="eval"][-1]["accuracy"])' "$1/metrics.jsonl" 2>/dev/null || echo 0
}
MPI=(mpirun --oversubscribe --bind-to none)
# Exact float comparisons with the CPU need TF32 off where the build has the flag.
tf32=(); "$exe" train --help 2>/dev/null | grep -q -- --tf32 && tf32=(--tf32 off)

fashion() {
  [ -s "$work/fashion.h5" ] || "$exe" convert idx -o "$work/fashion.h5" > "$out/convert.log" 2>&1
  echo "$work/fashion.h5"
}

check_env() {
  { nvidia-smi; nvidia-smi -q | grep -iE 'driver version|cuda version|product name|uuid'; } > "$out/env.log" 2>&1
  run env-info 60 "$exe" info --device cuda; pass_if env-info $? "$(grep -iE 'nccl|cudnn|driver' "$out/env-info.log" | tr '\n' ' ' | cut -c1-300)"
}

check_ctest() {
  (cd build && run ctest 900 ctest -L gpu --output-on-failure --timeout 300)
  local rc=$?
  pass_if ctest $rc "$(grep -E 'tests passed|Skipped|\*\*\*' "$out/ctest.log" | tr '\n' ' ' | cut -c1-400)"
  grep -q 'Not Run\|Skipped' "$out/ctest.log" && note ctest FAIL "a gpu test skipped on a GPU host"
}

check_nccl2() {
  local nc=(launch/netns-cluster --nodes 2 --ranks-per-node 1 --timeout 240 --)
  local rc=0
  # every dtype and op is checked element by element by ctest's
  # gpu_nccl_collectives_2nodes; the benchmark's own check covers these
  for dt in ${NCCL2_DTYPES:-f32 bf16 i64}; do
    for op in ${NCCL2_OPS:-sum avg}; do
      run "nccl2-$dt-$op" 240 "${nc[@]}" "$exe" bench allreduce --backend nccl --device cuda --dtype "$dt" \
        --op "$op" -b 8 -e 8M -f 8 -n 5 -w 1 --timeout 60 || rc=1
      cat "$out/nccl2-$dt-$op.log" >> "$out/nccl2.log"; rm -f "$out/nccl2-$dt-$op.log"
      [ $rc = 0 ] || break 2
    done
  done
  pass_if nccl2-dtypes $rc "(see nccl2.log; 'wrong' column must be 0)"
  # one rank killed with SIGKILL after 10 s of a long benchmark
  local t0=$SECONDS
  run nccl2-kill 200 "${nc[@]}" tests/multinode/kill_rank_after.sh 1 10 "$exe" bench allreduce --backend nccl \
    --device cuda -b 64M -e 64M -n 100000 --timeout 30
  local rc2=$?
  note nccl2-kill INFO "exit $rc2 after $((SECONDS - t0)) s: $(grep -iE 'fatal|timed out|rank 1|killed|signal' "$out/nccl2-kill.log" | head -3 | tr '\n' ' ' | cut -c1-300)"
  # a rank that never joins the NCCL communicator (after MPI is up): the other
  # rank's init must time out after --timeout and end the job, naming it
  t0=$SECONDS
  run nccl2-nojoin 200 env RINGTRAIN_FAULT_NCCL_LATE_RANK=1 "${nc[@]}" "$exe" bench allreduce --backend nccl \
    --device cuda -b 1M -e 1M -n 10 --timeout 20
  rc2=$?
  note nccl2-nojoin INFO "exit $rc2 after $((SECONDS - t0)) s: $(grep -iE 'fatal|timed out|did not' "$out/nccl2-nojoin.log" | head -3 | tr '\n' ' ' | cut -c1-300)"
  run nccl2-bench 300 "${nc[@]}" "$exe" bench allreduce --backend nccl --device cuda -b 8 -e 256M -f 4 -n 20
  pass_if nccl2-bench $?
}

check_train() {
  local data; data=$(fashion)
  local common=(--data "$data" --model cnn --lr 0.05 --momentum 0.9 --timeout 120)
  # the recipe of tests/trainer/fashion_accuracy.sh (there: 2 CPU ranks)
  run train-acc 900 "$exe" train "${common[@]}" --device cuda --batch 128 --epochs 8 --schedule cosine \
    --warmup 100 --logdir "$work/acc" --log-every 200
  local rc=$? acc; acc=$(accuracy "$work/acc")
  python3 -c "import sys; sys.exit(0 if float('$acc') >= 0.91 and $rc == 0 else 1)"; pass_if train-acc $? "accuracy $acc"
  # GPU against CPU after 20 steps
  run train-gpu20 300 "$exe" train "${common[@]}" --device cuda "${tf32[@]}" --batch 64 --max-steps 20 \
    --ckpt-dir "$work/g20" --logdir "$work/g20" || true
  run train-cpu20 300 "$exe" train "${common[@]}" --device cpu --batch 64 --max-steps 20 --ckpt-dir "$work/c20" \
    --logdir "$work/c20" || true
  run cmp-gpu-cpu 60 "$cmp" "$(last_ckpt "$work/g20")" "$(last_ckpt "$work/c20")" --rtol 1e-3 --atol 1e-5
  pass_if cmp-gpu-cpu $? "$(tail -3 "$out/cmp-gpu-cpu.log" | tr '\n' ' ')"
  # --accum 2 --cache against the doubled batch
  run train-accum 300 "$exe" train "${common[@]}" --device cuda "${tf32[@]}" --batch 32 --accum 2 --cache \
    --max-steps 20 --ckpt-dir "$work/a2" --logdir "$work/a2" || true
  # batch 32 and 64 may get different cuDNN algorithms (other rounding), so the
  # tolerance is the one of GPU against CPU above
  run cmp-accum 60 "$cmp" "$(last_ckpt "$work/a2")" "$work/g20/ckpt-20.h5" --rtol 1e-3 --atol 1e-5
  pass_if cmp-accum $? "$(tail -3 "$out/cmp-accum.log" | tr '\n' ' ')"
  # resume a GPU checkpoint on the GPU, evaluate it on the CPU
  mkdir -p "$work/g40"; cp "$work/g20/ckpt-20.h5" "$work/g40/"
  run train-resume 300 "$exe" train "${common[@]}" --device cuda --batch 64 --max-steps 40 --ckpt-dir "$work/g40" \
    --resume latest --logdir "$work/g40"
  pass_if train-resume $? "$(grep -iE 'resumed' "$out/train-resume.log" | head -1)"
  run eval-cpu 300 "$exe" eval --device cpu --data "$data" --ckpt "$work/g40/ckpt-40.h5"
  pass_if eval-cpu $? "$(grep -iE 'accuracy' "$out/eval-cpu.log" | tail -1)"
  # SIGTERM writes a checkpoint
  mkdir -p "$work/term"
  "$exe" train "${common[@]}" --device cuda --batch 64 --epochs 100 --ckpt-dir "$work/term" \
      --logdir "$work/term" > "$out/train-sigterm.log" 2>&1 &
  local pid=$!
  sleep 8; kill -TERM $pid; wait $pid; local rc3=$?
  # 143: ringtrain ends with the signal's status once its checkpoint is written
  grep -q "stopping after step" "$out/train-sigterm.log" && [ -n "$(last_ckpt "$work/term")" ] \
    && [ $rc3 = 143 ]; pass_if train-sigterm $? "exit $rc3, checkpoint $(basename "$(last_ckpt "$work/term")" 2>/dev/null)"
  # 2 ranks sharing the GPU (staged shm) against 1 rank with the doubled batch
  run train-share 300 "${MPI[@]}" -np 2 "$exe" train "${common[@]}" --device cuda --allow-gpu-sharing "${tf32[@]}" \
    --batch 32 --max-steps 20 --ckpt-dir "$work/s2" --logdir "$work/s2" || true
  run cmp-share 60 "$cmp" "$(last_ckpt "$work/s2")" "$work/g20/ckpt-20.h5" --rtol 1e-3 --atol 1e-5
  pass_if cmp-share $? "$(tail -3 "$out/cmp-share.log" | tr '\n' ' ')"
  run cmp-share-accum 60 "$cmp" "$(last_ckpt "$work/s2")" "$(last_ckpt "$work/a2")" --rtol 1e-5 --atol 1e-7
  pass_if cmp-share-accum $? "$(tail -2 "$out/cmp-share-accum.log" | head -1)"
  # the same run twice: bit for bit
  run train-repeat 300 "$exe" train "${common[@]}" --device cuda "${tf32[@]}" --batch 64 --max-steps 20 \
    --ckpt-dir "$work/g20b" --logdir "$work/g20b" || true
  run cmp-repeat 60 "$cmp" "$work/g20/ckpt-20.h5" "$work/g20b/ckpt-20.h5" --exact
  pass_if cmp-repeat $? "$(tail -2 "$out/cmp-repeat.log" | head -1)"
  cp "$work/acc/metrics.jsonl" "$out/train-acc-metrics.jsonl" 2>/dev/null
}

check_sanitize() {
  # A small synthetic set: the sanitizers slow kernels 10-100x, and the final
  # evaluation would otherwise cover 10000 samples.
  local data=$work/small.h5
  "$exe" convert synthetic --force --n 2048 --test-n 101 --shape 1,28,28 --classes 10 --seed 3 -o "$data" > /dev/null
  # NCCL probes its own kernels with cudaFuncGetAttributes at start-up, which
  # memcheck reports as API errors (no kernel image for this GPU): not ours, so
  # API errors are not reported; memory and race errors in kernels are.
  local api=(--report-api-errors no)
  for tool in memcheck racecheck; do
    run "san-ops-$tool" 400 compute-sanitizer --tool "$tool" --error-exitcode 9 build/tests/model/gpu_ops_test
    pass_if "san-ops-$tool" $? "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-ops-$tool.log" | tail -1)"
    run "san-train-$tool" 400 compute-sanitizer --tool "$tool" "${api[@]}" --error-exitcode 9 "$exe" train \
      --data "$data" --model cnn --device cuda --batch 64 --max-steps 20 --timeout 300
    pass_if "san-train-$tool" $? "$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san-train-$tool.log" | tail -1)"
  done
}

check_speed() {
  if [ -f launch/bench/peer_gpu_step.py ]; then
    # PyTorch brings its own cuDNN: it must not see the CUDA library folders
    # that ringtrain's LD_LIBRARY_PATH names; ringtrain keeps them (a wrapper).
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s" exec "%s" "$@"\n' "$LD_LIBRARY_PATH" "$exe" > "$work/ringtrain"
    chmod +x "$work/ringtrain"
    local torch_path
    torch_path=$(tr ':' '\n' <<< "$LD_LIBRARY_PATH" | grep -vE '^/usr/lib/x86_64-linux-gnu$|cuda' | paste -sd:)
    run speed-peer 500 env LD_LIBRARY_PATH="$torch_path" PYTHONUNBUFFERED=1 python3 launch/bench/peer_gpu_step.py \
      --ringtrain "$work/ringtrain" --repeats 3
    pass_if speed-peer $?
  fi
  local m b
  for c in cnn:64 cnn:512 mlp:784-512-512-10:64 mlp:784-512-512-10:1024; do
    m=${c%:*} b=${c##*:}
    run "speed-step" 120 "$exe" bench step --device cuda --model "$m" --batch "$b" --steps 200
    cat "$out/speed-step.log" >> "$out/speed-steps.log"
  done
  note speed-step INFO "see speed-steps.log"
  run speed-nccl1 200 "$exe" bench allreduce --backend nccl --device cuda -b 8 -e 1G -f 4 -n 20
  pass_if speed-nccl1 $?
}

for c in "${checks[@]}"; do
  echo "=== $c ($(date +%T))" | tee -a "$summary"
  "check_$c"
done
rm -rf "$work"
echo "=== done ($(date +%T))" | tee -a "$summary"
