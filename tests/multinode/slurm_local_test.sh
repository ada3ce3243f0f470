#!/usr/bin/env bash
# launch/slurm/train.sbatch on a real one-node Slurm (launch/slurm/local-cluster),
# unchanged, as a CPU job (DEVICE=cpu and --gpus-per-task=0 on the command line):
#   complete    2 tasks train the mlp to the end: sacct says COMPLETED 0:0 and
#               the output file has the final accuracy
#   mpirun      the same with LAUNCHER=mpirun (ringtrain-mpirun in the allocation)
#   timelimit   --time=1 --signal=B:TERM@50: the signal reaches ringtrain, which
#               checkpoints; the job requeues itself and the next run resumes at
#               the same sample and finishes, with the parameters of an
#               uninterrupted 2-rank run (bit for bit)
#   scancel     scancel mid-run leaves a checkpoint that reads and no temporary
#   too_many    3 tasks on a 2-CPU node: refused by sbatch with Slurm's own
#               message; the template never runs (no output file)
# Exits 77 (skipped) where the daemons cannot run (not root, not installed).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
: "${RINGTRAIN_EXE:?}" "${COMPARE:?}"
case=${1:-}

# Outside the cluster: start one and come back inside it.
if [ -z "${RINGTRAIN_SLURM_DIR:-}" ]; then
  reason=$("$root/launch/slurm/local-cluster" --check 2>&1)
  rc=$?
  [ $rc -eq 77 ] && { echo "SKIPPED: $reason"; exit 77; }
  [ $rc -eq 0 ] || { echo "FAIL: $reason"; exit 1; }
  exec "$root/launch/slurm/local-cluster" -- "$0" "$@"
fi

fail() { echo "FAIL: $*" >&2; exit 1; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ringtrain-slurm-test.XXXXXX")
chmod 755 "$WORK"
trap 'rm -rf "$WORK"' EXIT

# job_state ID: "STATE|EXITCODE" from the accounting (sacct) or, without it,
# from the controller.
job_state() {
  if [ "${RINGTRAIN_SLURM_ACCOUNTING:-0}" -eq 1 ]; then
    sacct -j "$1" -X -n -P -o State,ExitCode 2>/dev/null | tail -n 1
  else
    scontrol show job "$1" 2>/dev/null | tr ' ' '\n' | awk -F= '$1=="JobState"{s=$2} $1=="ExitCode"{e=$2} END{print s "|" e}'
  fi
}
# wait_job ID SECONDS: until the job has ended for good (requeues included).
wait_job() {
  local s
  for _ in $(seq "$(($2 * 2))"); do
    s=$(scontrol show job "$1" -o 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2)
    case $s in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE) return 0 ;; esac
    sleep 0.5
  done
  scontrol show job "$1"; grep -v "^epoch\|^eval" "$WORK/out.txt" 2>/dev/null | tail -n 30; fail "job $1 still '$s' after $2 s"
}
# sacct may lag the controller by a moment.
accounted_state() {
  local s
  for _ in $(seq 40); do
    s=$(job_state "$1")
    case $s in COMPLETED*|FAILED*|CANCELLED*|TIMEOUT*) echo "$s"; return ;; esac
    sleep 0.5
  done
  echo "$s"
}

# The template's settings for a small CPU job.
export DEVICE=cpu RINGTRAIN=$RINGTRAIN_EXE RINGTRAIN_ROOT=$root MODEL=mlp:64-32-4 BATCH=8
export CKPT_DIR=$WORK/ckpt LOGDIR=$WORK/logs
cpu_job=(--gpus-per-task=0 --nodes=1 --ntasks-per-node=2 --cpus-per-task=1 --job-name=rt-test)

case $case in
  complete|mpirun)
    # mpirun: LAUNCHER=mpirun, launch/ringtrain-mpirun inside the allocation;
    # Open MPI reads the allocation and starts its daemon through Slurm.
    "$RINGTRAIN_EXE" convert synthetic --force --n 256 --test-n 101 --shape 1,8,8 --classes 4 --seed 7 -o "$WORK/data.h5" >/dev/null 2>&1 ||
      fail "could not make the data set"
    export DATA=$WORK/data.h5 EPOCHS=3 CKPT_EVERY=10 EXTRA_ARGS="--backend shm --timeout 60 --log-every 8"
    [ "$case" = mpirun ] && export LAUNCHER=mpirun
    id=$(sbatch --parsable --wait "${cpu_job[@]}" --time=5 --output="$WORK/out-%j.txt" "$root/launch/slurm/train.sbatch")
    rc=$?
    cat "$WORK/out-$id.txt"
    [ $rc -eq 0 ] || fail "sbatch --wait: exit code $rc"
    state=$(accounted_state "$id")
    echo "job $id: $state"
    [ "$state" = "COMPLETED|0:0" ] || fail "job $id is '$state', expected COMPLETED|0:0"
    grep -q "ringtrain: done after 48 steps .*test accuracy [0-9.]*" "$WORK/out-$id.txt" || fail "no final accuracy in the output"
    grep -q "ringtrain train: 2 rank(s) on 1 node(s), backend shm" "$WORK/out-$id.txt" || fail "not 2 ranks"
    if [ "$case" = mpirun ]; then
      grep -q "running: env RINGTRAIN_EXE=.*ringtrain-mpirun -n 2 " "$WORK/out-$id.txt" || fail "not launched through ringtrain-mpirun"
    fi
    echo "PASS: sbatch of train.sbatch (LAUNCHER=${LAUNCHER:-srun}) completed (${state}) with the final accuracy in its output" ;;

  timelimit)
    # Long enough that the first run meets the signal (10 to ~40 s after the
    # start: slurmctld checks time limits every 30 s): each step of the job
    # takes at least 30 ms (RINGTRAIN_FAULT_STEP_DELAY_MS), so 2500 steps at
    # least 75 s, well past the signal on a loaded machine too. Once requeued, the job gets 10 minutes, so that the requeued
    # run finishes (Slurm may signal a requeued 1-minute job at once, before
    # ringtrain has installed its handler, and then again and again).
    "$RINGTRAIN_EXE" convert synthetic --force --n 4096 --test-n 101 --shape 1,16,16 --classes 4 --seed 7 -o "$WORK/data.h5" >/dev/null 2>&1 ||
      fail "could not make the data set"
    steps=${STEPS:-2500}
    flags=(--model mlp:256-512-512-4 --batch 32 --max-steps "$steps" --epochs 100 --seed 3 --lr 0.01)
    export DATA=$WORK/data.h5 MODEL=mlp:256-512-512-4 BATCH=32 EPOCHS=100 CKPT_EVERY=100000
    export EXTRA_ARGS="--max-steps $steps --seed 3 --lr 0.01 --backend shm --timeout 60 --log-every 100"
    # The same run without interruption (same 2 ranks, same flags), meanwhile.
    mpirun --oversubscribe --bind-to none -np 2 "$RINGTRAIN_EXE" train --data "$DATA" "${flags[@]}" --device cpu \
      --backend shm --ckpt-dir "$WORK/ref" >"$WORK/ref.log" 2>&1 &
    ref=$!
    id=$(RINGTRAIN_FAULT_STEP_DELAY_MS=30 sbatch --parsable "${cpu_job[@]}" --time=1 --signal=B:TERM@50 --output="$WORK/out.txt" "$root/launch/slurm/train.sbatch")
    for _ in $(seq 600); do grep -q "requeueing to resume" "$WORK/out.txt" 2>/dev/null && break; sleep 0.2; done
    grep -q "requeueing to resume" "$WORK/out.txt" || { cat "$WORK/out.txt"; fail "the job was not requeued within 120 s"; }
    scontrol update JobId="$id" TimeLimit=10 || fail "cannot extend the requeued job's time limit"
    wait_job "$id" 500
    cat "$WORK/out.txt"
    state=$(accounted_state "$id")
    echo "job $id: $state"
    [ "$state" = "COMPLETED|0:0" ] || fail "job $id ended '$state'"
    grep -q "SIGTERM (time limit near)" "$WORK/out.txt" || fail "the time-limit signal did not reach the batch shell"
    stop_line=$(grep -m1 -E "stop requested \(SIG(TERM|USR1)\): stopping after step" "$WORK/out.txt") || fail "ringtrain did not stop on the signal"
    stopped=${stop_line##* }
    grep -q "requeueing to resume" "$WORK/out.txt" || fail "not requeued"
    grep -q "restart 1\\]: checkpoints found" "$WORK/out.txt" || fail "no requeued run"
    grep -q "restart 2\\]" "$WORK/out.txt" && fail "requeued more than once"
    hash=$("$COMPARE" --hash "$CKPT_DIR/ckpt-$stopped.h5") || fail "cannot hash ckpt-$stopped"
    grep -q "resumed from .*ckpt-$stopped.h5 at step $stopped .*parameters hash $hash on every rank" "$WORK/out.txt" ||
      fail "the requeued run did not resume at step $stopped with the checkpoint's parameters (hash $hash)"
    grep -q "ringtrain: done after $steps steps" "$WORK/out.txt" || fail "the requeued run did not finish"
    wait "$ref" || { cat "$WORK/ref.log"; fail "reference run failed"; }
    "$COMPARE" "$WORK/ref/ckpt-$steps.h5" "$CKPT_DIR/ckpt-$steps.h5" --exact || fail "parameters differ from the uninterrupted run"
    echo "PASS: time limit -> checkpoint at step $stopped -> requeue -> resume -> same parameters as without interruption" ;;

  scancel)
    "$RINGTRAIN_EXE" convert synthetic --force --n 4096 --test-n 101 --shape 1,16,16 --classes 4 --seed 7 -o "$WORK/data.h5" >/dev/null 2>&1 ||
      fail "could not make the data set"
    export DATA=$WORK/data.h5 MODEL=mlp:256-512-512-4 BATCH=32 EPOCHS=100 CKPT_EVERY=50
    export EXTRA_ARGS="--max-steps 100000 --backend shm --timeout 60 --log-every 50"
    id=$(RINGTRAIN_FAULT_STEP_DELAY_MS=20 sbatch --parsable "${cpu_job[@]}" --time=10 --output="$WORK/out.txt" "$root/launch/slurm/train.sbatch")
    for _ in $(seq 600); do compgen -G "$CKPT_DIR/ckpt-*.h5" >/dev/null && break; sleep 0.2; done
    compgen -G "$CKPT_DIR/ckpt-*.h5" >/dev/null || { cat "$WORK/out.txt"; fail "no checkpoint before scancel"; }
    scancel "$id"
    wait_job "$id" 60
    sleep 1
    cat "$WORK/out.txt"
    state=$(accounted_state "$id")
    echo "job $id: $state"
    case $state in CANCELLED*) ;; *) fail "job $id is '$state' after scancel" ;; esac
    ls -la "$CKPT_DIR"
    ! compgen -G "$CKPT_DIR/*.tmp-*" >/dev/null || fail "a temporary (half-written) checkpoint was left"
    newest=$(ls "$CKPT_DIR"/ckpt-*.h5 | sort -V | tail -n 1)
    "$COMPARE" "$newest" "$newest" --exact >/dev/null || fail "the newest checkpoint $newest does not read"
    echo "PASS: scancel left $(basename "$newest"), which reads, and no temporary" ;;

  too_many)
    export DATA=$WORK/none.h5 EPOCHS=1
    cpus=$(sinfo -h -o %c | head -n 1)
    out=$(sbatch --parsable --gpus-per-task=0 --nodes=1 --ntasks-per-node=$((cpus + 1)) --cpus-per-task=1 \
            --output="$WORK/out-%j.txt" "$root/launch/slurm/train.sbatch" 2>&1)
    rc=$?
    echo "$out"
    [ $rc -ne 0 ] || fail "sbatch accepted $((cpus + 1)) tasks on a $cpus-CPU node"
    echo "$out" | grep -Eq "sbatch: error: Batch job submission failed: (More processors requested than permitted|Requested node configuration is not available)" || fail "not Slurm's own refusal"
    ! compgen -G "$WORK/out-*.txt" >/dev/null || fail "the template ran (an output file exists)"
    echo "PASS: $((cpus + 1)) tasks on $cpus CPUs refused by Slurm: $out" ;;

  *) echo "usage: $0 complete|mpirun|timelimit|scancel|too_many" >&2; exit 2 ;;
esac
