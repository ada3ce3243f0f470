#!/usr/bin/env bash
# sbatch_template_test.sh CASE: runs launch/slurm/train.sbatch as Slurm would
# (the SLURM_* variables of a 2-node x 2-task job) with stand-ins for srun,
# scontrol and mpirun that record how they were called.
#   fresh     no checkpoint: srun --mpi=pmix ... train without --resume
#   resume    a ckpt-<step>.h5 in the checkpoint dir: --resume latest
#   sigterm   SIGTERM to the batch shell reaches the step (as SIGUSR1 to srun),
#             then the job is requeued
#   mpirun    LAUNCHER=mpirun: ringtrain-mpirun inside the allocation
#   not_run   the launcher exits 0 but ringtrain never ran (no end-of-run
#             record): not a success; the job is requeued to resume
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
script=$root/launch/slurm/train.sbatch
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

mkdir -p "$tmp/bin" "$tmp/ckpt"
# srun / mpirun stand-in: records its arguments; with FAKE_STEP_SECONDS it runs
# that long, and on SIGTERM records it and exits as ringtrain does after its
# checkpoint. A run that ends with 0 leaves rank 0's end-of-run record, unless
# FAKE_NOT_RUN is set (an srun whose step was aborted before it started).
cat >"$tmp/bin/srun" <<'STUB'
#!/usr/bin/env bash
echo "$(basename "$0") $*" >>"$FAKE_LOG"
trap 'echo "step got SIGTERM" >>"$FAKE_LOG"; exit 0' TERM
trap 'echo "step got SIGUSR1" >>"$FAKE_LOG"; exit 0' USR1
for ((i = 0; i < ${FAKE_STEP_SECONDS:-0} * 10; i++)); do sleep 0.1; done
if [ "${FAKE_STEP_RC:-0}" -eq 0 ] && [ -z "${FAKE_NOT_RUN:-}" ]; then
  echo '{"epochs":3.0,"kind":"summary","step":30,"stopped_by_signal":false}' >>"$LOGDIR/metrics.jsonl"
fi
exit "${FAKE_STEP_RC:-0}"
STUB
cp "$tmp/bin/srun" "$tmp/bin/mpirun"
printf '#!/bin/sh\necho "scontrol $*" >>"$FAKE_LOG"\n' >"$tmp/bin/scontrol"
chmod +x "$tmp/bin/"*

export PATH="$tmp/bin:$PATH" FAKE_LOG=$tmp/calls.log
export SLURM_JOB_ID=4242 SLURM_JOB_NAME=rt SLURM_NTASKS=4 SLURM_JOB_NUM_NODES=2
export SLURM_JOB_NODELIST='gpu[01-02]' SLURM_SUBMIT_DIR=$root
export RINGTRAIN=/bin/true DATA=/data/d.h5 CKPT_DIR=$tmp/ckpt LOGDIR=$tmp/logs EPOCHS=3
: >"$FAKE_LOG"

run() {
  timeout 60 bash "$script" >"$tmp/out" 2>&1
  rc=$?
  cat "$tmp/out"; echo "--- calls:"; cat "$FAKE_LOG"; echo "--- exit code $rc"
}

case ${1:-} in
  fresh)
    run
    [ "$rc" -eq 0 ] || fail "exit code $rc"
    grep -q "^srun --mpi=pmix --kill-on-bad-exit=1 .* /bin/true train --data /data/d.h5 .*--epochs 3 --ckpt-dir $tmp/ckpt " "$FAKE_LOG" ||
      fail "srun line"
    grep -q -- "--resume" "$FAKE_LOG" && fail "--resume without a checkpoint"
    grep -q scontrol "$FAKE_LOG" && fail "requeued a finished job"
    # A step that ends within the file-time tick of its launch: its summary,
    # no newer than the launch stamp, still counts (it changed the file).
    : >"$FAKE_LOG"
    cat >"$tmp/bin/touch" <<'STUB'
#!/bin/sh
/usr/bin/touch -d '2030-01-01 00:00:00' "$@"
STUB
    chmod +x "$tmp/bin/touch"
    run
    rm -f "$tmp/bin/touch"
    [ "$rc" -eq 0 ] || fail "exit code $rc with the summary in the launch's tick"
    grep -q scontrol "$FAKE_LOG" && fail "requeued a job whose summary shares its launch's file time"
    echo "PASS" ;;
  resume)
    touch "$tmp/ckpt/ckpt-1200.h5"
    run
    [ "$rc" -eq 0 ] || fail "exit code $rc"
    grep -q "^srun .* --resume latest" "$FAKE_LOG" || fail "no --resume latest with a checkpoint present"
    echo "PASS" ;;
  sigterm)
    export FAKE_STEP_SECONDS=30
    bash "$script" >"$tmp/out" 2>&1 &
    pid=$!
    for _ in $(seq 50); do grep -q '^srun' "$FAKE_LOG" && break; sleep 0.1; done
    kill -TERM "$pid"
    wait "$pid"; rc=$?
    cat "$tmp/out"; echo "--- calls:"; cat "$FAKE_LOG"; echo "--- exit code $rc"
    [ "$rc" -eq 0 ] || fail "exit code $rc"
    # srun kills the step on SIGTERM but forwards SIGUSR1 to the tasks.
    grep -q "step got SIGUSR1" "$FAKE_LOG" || fail "the stop request (SIGUSR1 to srun) did not reach the step"
    grep -q "^scontrol requeue 4242" "$FAKE_LOG" || fail "not requeued"
    SLURM_RESTART_COUNT=20 bash "$script" >"$tmp/out" 2>&1 &
    pid=$!
    sleep 1; kill -TERM "$pid"; wait "$pid"; rc=$?
    [ "$rc" -ne 0 ] && grep -q "not requeued" "$tmp/out" || fail "requeued beyond MAX_REQUEUES"
    echo "PASS" ;;
  mpirun)
    LAUNCHER=mpirun run
    [ "$rc" -eq 0 ] || fail "exit code $rc"
    grep -q "^mpirun -np 4 --map-by ppr:2:node --bind-to socket .* /bin/true train --data /data/d.h5" "$FAKE_LOG" ||
      fail "mpirun line (no machinefile inside an allocation, 2 GPUs per node)"
    grep -q -- "--machinefile" "$FAKE_LOG" && fail "a machinefile inside an allocation"
    echo "PASS" ;;
  not_run)
    # An earlier run's end-of-run record does not count either.
    mkdir -p "$LOGDIR"
    echo '{"kind":"summary","step":10,"stopped_by_signal":false}' >"$LOGDIR/metrics.jsonl"
    sleep 0.1
    FAKE_NOT_RUN=1 run
    [ "$rc" -eq 0 ] || fail "exit code $rc (the requeue is the job's way on)"
    grep -q "the launcher exited 0 but ringtrain recorded no end of training" "$tmp/out" || fail "no message"
    grep -q "^scontrol requeue 4242" "$FAKE_LOG" || fail "not requeued"
    grep -q "training ended with exit code 0" "$tmp/out" && fail "reported success"
    FAKE_NOT_RUN=1 SLURM_RESTART_COUNT=20 run
    [ "$rc" -ne 0 ] && grep -q "not requeued" "$tmp/out" || fail "requeued beyond MAX_REQUEUES, or exit code 0"
    ! compgen -G "$LOGDIR/.launch-*" >/dev/null || fail "the launch stamp was left in $LOGDIR"
    echo "PASS" ;;
  *) echo "usage: $0 fresh|resume|sigterm|mpirun|not_run" >&2; exit 2 ;;
esac
