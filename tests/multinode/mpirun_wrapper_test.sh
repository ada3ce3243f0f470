#!/usr/bin/env bash
# mpirun_wrapper_test.sh CASE: one check of launch/ringtrain-mpirun per ctest.
# Needs RINGTRAIN_EXE (the built ringtrain binary).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
wrapper=$root/launch/ringtrain-mpirun
exe=${RINGTRAIN_EXE:?RINGTRAIN_EXE must name the ringtrain binary}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "PASS: $*"; exit 0; }

# run_wrapper ARGS...: sets out (stdout and stderr) and rc.
run_wrapper() {
  out=$(timeout --kill-after=5 60 "$wrapper" "$@" 2>&1)
  rc=$?
  printf '%s\n' "$out" | tail -n 30
  echo "--- exit code $rc"
  [ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || fail "ringtrain-mpirun hung"
}
expect_error() {  # expect_error REGEX ARGS...
  local regex=$1; shift
  run_wrapper "$@"
  [ "$rc" -ne 0 ] || fail "expected an error, got exit code 0"
  printf '%s\n' "$out" | grep -Eq -- "$regex" || fail "error message does not match /$regex/"
  printf '%s\n' "$out" | grep -q '^ringtrain-mpirun: mpirun ' && fail "mpirun was started despite the error"
  true
}
# A clean, known environment, so the -x list is exact.
# shellcheck disable=SC2054  # CUDA_VISIBLE_DEVICES=0,1 is one word
clean_env=(env -i "PATH=$PATH" "RINGTRAIN_EXE=$exe" LD_LIBRARY_PATH=/opt/x/lib NCCL_DEBUG=INFO
           NCCL_SOCKET_IFNAME=eth0 CUDA_VISIBLE_DEVICES=0,1 OMPI_COMM_WORLD_RANK=7 HOME=/nonexistent)
root_x=""
[ "$(id -u)" -eq 0 ] && root_x=" -x OMPI_ALLOW_RUN_AS_ROOT -x OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"
env_x="-x CUDA_VISIBLE_DEVICES -x LD_LIBRARY_PATH -x NCCL_DEBUG -x NCCL_SOCKET_IFNAME$root_x"
env_x+=" -x PATH"
env_x+=" -x OPENBLAS_NUM_THREADS=1"

expect_line() {  # expect_line EXPECTED ARGS...: the dry-run prints exactly EXPECTED
  local want=$1; shift
  out=$("${clean_env[@]}" "$wrapper" --dry-run "$@" 2>&1)
  rc=$?
  echo "got:  $out"
  echo "want: $want"
  [ "$rc" -eq 0 ] || fail "--dry-run exited with $rc"
  [ "$out" = "$want" ] || fail "the mpirun line differs"
}

case ${1:-} in
  dry_run_cpu)
    # Comments, blank lines, max_slots and a repeated host (slots add up).
    printf '# cluster\n\nhostA slots=2   # two cores\n  hostB slots=3 max_slots=4\nhostA\n' >"$tmp/hosts"
    expect_line "mpirun -np 6 --machinefile $tmp/hosts --map-by core --bind-to core $env_x $exe info" \
      -n 6 --machinefile "$tmp/hosts" info
    expect_line "mpirun -np 6 --machinefile $tmp/hosts --map-by core --bind-to core $env_x $exe train --batch 4" \
      --machinefile "$tmp/hosts" train --batch 4
    expect_line "mpirun -np 2 --machinefile $tmp/hosts --map-by core --bind-to core $env_x /bin/echo a\\ b" \
      -n 2 --machinefile "$tmp/hosts" -- /bin/echo "a b"
    pass "CPU dry runs print the expected mpirun lines" ;;
  dry_run_gpu)
    expect_line "mpirun -np 16 --machinefile $root/machinefiles/two-nodes.example --map-by ppr:8:node --bind-to socket $env_x $exe train" \
      --machinefile "$root/machinefiles/two-nodes.example" --gpus-per-node 8 train
    expect_line "mpirun -np 32 --machinefile $root/machinefiles/4x8gpu.example --map-by ppr:8:node --bind-to socket $env_x $exe info" \
      --machinefile "$root/machinefiles/4x8gpu.example" --gpus-per-node 8 info
    expect_line "mpirun -np 8 --machinefile $root/machinefiles/4x8gpu.example --map-by ppr:4:socket --bind-to numa --report-bindings $env_x --mca btl_tcp_if_include ib0 $exe info" \
      --machinefile "$root/machinefiles/4x8gpu.example" --gpus-per-node 8 -n 8 --map-by ppr:4:socket --bind-to numa \
      --report-bindings --mca btl_tcp_if_include ib0 info
    pass "GPU dry runs print the expected mpirun lines" ;;
  dry_run_oversubscribe)
    expect_line "mpirun -np 5 --machinefile $root/machinefiles/localhost --oversubscribe --map-by slot --bind-to none $env_x $exe info" \
      -n 5 --oversubscribe info
    expect_line "mpirun -np 2 --machinefile $root/machinefiles/localhost --oversubscribe --map-by core --bind-to core $env_x $exe info" \
      -n 2 --oversubscribe info
    pass "oversubscribed ranks are not bound" ;;
  bad_machinefile)
    printf 'hostA slots=2\n# fine\nhostB slots=zero\n' >"$tmp/f1"
    expect_error "$tmp/f1:3: .*slots must be a positive whole number, got 'zero'" -n 1 --machinefile "$tmp/f1" info
    printf 'hostA slots=0\n' >"$tmp/f2"
    expect_error "$tmp/f2:1: .*slots must be a positive whole number, got '0'" -n 1 --machinefile "$tmp/f2" info
    printf '\nhostA slots=2 gpus=4\n' >"$tmp/f3"
    expect_error "$tmp/f3:2: .*unknown field 'gpus=4'" -n 1 --machinefile "$tmp/f3" info
    printf 'hostA slots=2\nhost_b! slots=2\n' >"$tmp/f4"
    expect_error "$tmp/f4:2: .*'host_b!' is not a host name" -n 1 --machinefile "$tmp/f4" info
    printf 'hostA slots=4 max_slots=2\n' >"$tmp/f5"
    expect_error "$tmp/f5:1: .*max_slots=2 is below slots=4" -n 1 --machinefile "$tmp/f5" info
    printf '# only comments\n\n' >"$tmp/f6"
    expect_error "machinefile $tmp/f6 lists no host" -n 1 --machinefile "$tmp/f6" info
    expect_error "machinefile $tmp/missing does not exist" -n 1 --machinefile "$tmp/missing" info
    pass "bad machinefiles are rejected with the file and line" ;;
  np_exceeds_slots)
    expect_error "-n 3 is more than the 2 slot\\(s\\) in .*machinefiles/localhost \\(use --oversubscribe" -n 3 info
    expect_error "-n 17 is more than the 16 ranks of 8 GPU\\(s\\) x 2 host\\(s\\)" -n 17 --gpus-per-node 8 \
      --machinefile "$root/machinefiles/two-nodes.example" info
    expect_error "host localhost has slots=2 but --gpus-per-node is 4" --gpus-per-node 4 info
    pass "more ranks than slots is an error unless --oversubscribe" ;;
  bad_options)
    expect_error "-n/--np must be a positive whole number, got '0'" -n 0 info
    expect_error "-n/--np must be a positive whole number, got 'two'" -n two info
    expect_error "unknown option '--np-per-node'" --np-per-node 2 info
    expect_error "--bind-to must be one of" --bind-to cores info
    expect_error "--abort-grace must be a whole number of seconds, got '1.5'" --abort-grace 1.5 info
    expect_error "no command given" -n 2
    expect_error "program /nonexistent/prog does not exist" -n 1 /nonexistent/prog
    RINGTRAIN_EXE=/nonexistent/ringtrain expect_error "ringtrain binary not found at /nonexistent/ringtrain" -n 1 info
    run_wrapper --help
    [ "$rc" -eq 0 ] && printf '%s\n' "$out" | grep -q -- '--rank-logs DIR' || fail "--help"
    printf '%s\n' "$out" | grep -q -- '--abort-grace S' || fail "--help lacks --abort-grace"
    pass "bad options are rejected" ;;
  rank_logs)
    # A real 2-rank job: each rank's output lands in its own file, none on the terminal.
    run_wrapper -n 2 --rank-logs "$tmp/logs" info --device cpu
    [ "$rc" -eq 0 ] || fail "the job failed"
    [ -f "$tmp/logs/rank-0.log" ] && [ -f "$tmp/logs/rank-1.log" ] || fail "rank-0.log and rank-1.log expected in $tmp/logs"
    grep -q 'topology: 2 rank(s) on 1 node(s)' "$tmp/logs/rank-0.log" || fail "rank-0.log lacks rank 0's table"
    ! grep -q 'topology:' "$tmp/logs/rank-1.log" || fail "rank-1.log holds rank 0's output"
    ! printf '%s\n' "$out" | grep -q 'topology:' || fail "rank output reached the terminal"
    run_wrapper -n 2 --rank-logs "$tmp/logs2" -- /bin/sh -c 'echo "out of rank $OMPI_COMM_WORLD_RANK"; echo "err of rank $OMPI_COMM_WORLD_RANK" >&2'
    [ "$rc" -eq 0 ] || fail "the job failed"
    for r in 0 1; do
      echo "rank-$r.log:"; cat "$tmp/logs2/rank-$r.log"
      [ "$(cat "$tmp/logs2/rank-$r.log" | sort | tr '\n' '|')" = "err of rank $r|out of rank $r|" ] ||
        fail "rank-$r.log does not hold exactly rank $r's stdout and stderr"
    done
    pass "--rank-logs writes rank-R.log per rank" ;;
  rank_logs_failure)
    # A failing job with rank logs: the wrapper brings the fatal lines back.
    # An empty CUDA_VISIBLE_DEVICES hides every GPU, so --device cuda fails on a
    # GPU host too, on both ranks alike: rank 0's log says it once for both.
    CUDA_VISIBLE_DEVICES='' run_wrapper -n 2 --rank-logs "$tmp/logs" info --device cuda
    [ "$rc" -eq 2 ] || fail "the job should fail with exit code 2 (bad input), not $rc"
    printf '%s\n' "$out" | grep -Eq "rank-0.log: .*rank 0/.*fatal: .*--device cuda.*\[the same on ranks 0,1 \(all\)\]" ||
      fail "no summary line for the ranks' error, naming both"
    ! printf '%s\n' "$out" | grep -Eq "rank-1.log: .*fatal" || fail "rank 1 said the same error again"
    pass "a failure with rank logs names the failing ranks on the terminal" ;;
  restarts)
    # --max-restarts on this machine (one host, which needs no probe): a stand-in
    # "train" whose ranks fail with exit code 5 (a lost rank) the first two
    # times is relaunched with --resume latest and the same arguments; bad input
    # (exit code 2) is never retried; after N restarts the last code is returned.
    mkdir -p "$tmp/ckpt"
    touch -d '-3 seconds' "$tmp/ckpt/ckpt-40.h5"
    cat >"$tmp/fake" <<'STUB'
#!/bin/sh
# Rank 0 appends its arguments once per run, then fails while runs remain in
# FAIL_RUNS. Only rank 0 decides: another rank counting the file could read it
# before rank 0 has appended and fail a run meant to succeed.
[ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] || exit 0
echo "$*" >>"$CALLS"
n=$(wc -l <"$CALLS")
[ "$n" -le "${FAIL_RUNS:-0}" ] && exit "${FAIL_CODE:-5}"
exit 0
STUB
    chmod +x "$tmp/fake"
    export CALLS=$tmp/calls
    train=("$tmp/fake" train --data d.h5 --global-batch 64 --ckpt-dir "$tmp/ckpt")
    : >"$CALLS"
    FAIL_RUNS=2 run_wrapper -n 2 --oversubscribe --max-restarts 3 "${train[@]}"
    [ "$rc" -eq 0 ] || fail "should succeed on the third run"
    [ "$(wc -l <"$CALLS")" -eq 3 ] || fail "expected 3 runs, got $(wc -l <"$CALLS")"
    [ "$(sed -n 1p "$CALLS")" = "train --data d.h5 --global-batch 64 --ckpt-dir $tmp/ckpt" ] || fail "first run's arguments"
    [ "$(sed -n 3p "$CALLS")" = "train --data d.h5 --global-batch 64 --ckpt-dir $tmp/ckpt --resume latest" ] || fail "relaunch without --resume latest (once)"
    printf '%s\n' "$out" | grep -Eq "restart 1/3 on 1 host\(s\), 2 rank\(s\): resuming at step 40 \(.*ckpt-40.h5\); time lost [0-9.]+ s" || fail "no restart line with step and time lost"
    printf '%s\n' "$out" | grep -q "restart 2/3" || fail "no second restart"
    : >"$CALLS"
    FAIL_RUNS=9 FAIL_CODE=2 run_wrapper -n 2 --oversubscribe --max-restarts 3 "${train[@]}"
    [ "$rc" -eq 2 ] && [ "$(wc -l <"$CALLS")" -eq 1 ] || fail "bad input (exit code 2) was retried or lost its code"
    printf '%s\n' "$out" | grep -q "bad input (exit code 2): not restarted" || fail "no bad-input message"
    : >"$CALLS"
    FAIL_RUNS=9 FAIL_CODE=5 run_wrapper -n 2 --oversubscribe --max-restarts 2 "${train[@]}"
    [ "$rc" -ne 0 ] && [ "$(wc -l <"$CALLS")" -eq 3 ] || fail "expected 3 runs and a failure after 2 restarts (rc $rc)"
    printf '%s\n' "$out" | grep -q "giving up: the job failed (exit code .*) after 2 restart(s)" || fail "no give-up message"
    : >"$CALLS"
    FAIL_RUNS=9 FAIL_CODE=5 run_wrapper -n 2 --oversubscribe "${train[@]}"
    [ "$rc" -ne 0 ] && [ "$(wc -l <"$CALLS")" -eq 1 ] || fail "--max-restarts 0 (default) restarted"
    ! printf '%s\n' "$out" | grep -q "restart" || fail "--max-restarts 0 talks of restarts"
    # A real ringtrain with bad input: exit code 2, not retried.
    run_wrapper -n 2 --oversubscribe --max-restarts 2 train --data "$tmp/ckpt/ckpt-40.h5" --global-batch 8 \
      --ckpt-dir "$tmp/ckpt2" --device cpu
    [ "$rc" -eq 2 ] || fail "ringtrain on a file that is no data set: exit code $rc, expected 2"
    printf '%s\n' "$out" | grep -q "bad input (exit code 2): not restarted" || fail "ringtrain's bad input was retried"
    expect_error "needs --global-batch" --max-restarts 1 "$tmp/fake" train --batch 8 --ckpt-dir "$tmp/ckpt"
    expect_error "give --ckpt-dir" --max-restarts 1 "$tmp/fake" train --global-batch 8
    expect_error "--min-nodes 2 but .* lists 1 host" --max-restarts 1 --min-nodes 2 "${train[@]}"
    pass "--max-restarts relaunches lost jobs with --resume latest, never bad input, and gives up after N" ;;
  abort_grace)
    # --abort-grace on this machine: a stand-in whose rank 0 writes a flight
    # verdict (as a rank that ends the job does) and whose ranks then hang, as
    # mpirun waiting on a lost node's daemon would keep them: the wrapper ends
    # mpirun 2 s after the verdict, and the job counts as failed (a restart
    # follows). An earlier job's verdict left in the directory fires nothing.
    cat >"$tmp/hang" <<'STUB'
#!/bin/sh
# $1: the log directory (the command names it as --logdir too); HANG_RUNS:
# how many runs write a verdict and hang; later runs last RUN_SECS and exit
# 0; VANISH=1: a verdict that is removed a second after it appears.
echo run >>"$1/runs"
n=$(wc -l <"$1/runs")
if [ "$n" -le "${HANG_RUNS:-0}" ]; then
  [ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] && mkdir -p "$1/flight" && echo "rank 1 (host h) has been silent" >"$1/flight/verdict.txt"
  sleep 40
fi
if [ "${VANISH:-0}" = 1 ]; then
  mkdir -p "$1/flight" && echo "not this job's" >"$1/flight/verdict.txt"
  sleep 1
  rm -f "$1/flight/verdict.txt"
fi
sleep "${RUN_SECS:-0}"
exit 0
STUB
    chmod +x "$tmp/hang"
    mkdir -p "$tmp/run/ckpt"
    hang=("$tmp/hang" "$tmp/run" train --logdir "$tmp/run" --global-batch 8 --ckpt-dir "$tmp/run/ckpt")
    start=$(date +%s)
    HANG_RUNS=1 run_wrapper -n 1 --abort-grace 2 --max-restarts 1 "${hang[@]}"
    took=$(($(date +%s) - start))
    [ "$rc" -eq 0 ] || fail "the restart after the fired watcher should succeed (rc $rc)"
    printf '%s\n' "$out" | grep -q "a rank ended the job (flight verdict: rank 1 (host h) has been silent) and mpirun is still running 2s later" ||
      fail "no message naming the verdict"
    printf '%s\n' "$out" | grep -q "mpirun ended by --abort-grace (exit code [0-9]*): the job failed" || fail "no 'ended by --abort-grace' line"
    printf '%s\n' "$out" | grep -q "restart 1/1" || fail "the fired job was not restarted"
    [ "$took" -lt 30 ] || fail "took ${took}s: the watcher did not end the hanging mpirun"
    # Without --max-restarts: the job fails (exit 1), not as stopped by a signal.
    : >"$tmp/run/runs"
    HANG_RUNS=1 run_wrapper -n 1 --abort-grace 2 "${hang[@]}"
    [ "$rc" -eq 1 ] || fail "a fired job should fail with exit code 1, got $rc"
    # A verdict from an earlier job, before the launch: removed, nothing fires
    # (the job outlasts the grace).
    : >"$tmp/run/runs"
    mkdir -p "$tmp/run/flight" && echo "an earlier job's verdict" >"$tmp/run/flight/verdict.txt"
    HANG_RUNS=0 RUN_SECS=4 run_wrapper -n 1 --abort-grace 1 "${hang[@]}"
    [ "$rc" -eq 0 ] || fail "a job with an earlier job's verdict around failed (rc $rc)"
    ! printf '%s\n' "$out" | grep -q "abort-grace" || fail "the watcher fired on an earlier job's verdict"
    [ ! -e "$tmp/run/flight/verdict.txt" ] || fail "the earlier job's verdict was not removed before the launch"
    # A verdict that goes away during the countdown: watched again, no firing.
    : >"$tmp/run/runs"
    HANG_RUNS=0 VANISH=1 RUN_SECS=5 run_wrapper -n 1 --abort-grace 3 "${hang[@]}"
    [ "$rc" -eq 0 ] || fail "a verdict that went away ended the job (rc $rc)"
    ! printf '%s\n' "$out" | grep -q "abort-grace" || fail "the watcher fired on a verdict that went away"
    # Not training: no flight directory is watched or touched.
    : >"$tmp/run/runs"
    mkdir -p "$tmp/run/flight" && echo "the training's verdict" >"$tmp/run/flight/verdict.txt"
    HANG_RUNS=0 run_wrapper -n 1 --abort-grace 1 "$tmp/hang" "$tmp/run" eval --logdir "$tmp/run"
    [ "$rc" -eq 0 ] && [ -e "$tmp/run/flight/verdict.txt" ] || fail "a command other than train removed the verdict (rc $rc)"
    # 0: never.
    : >"$tmp/run/runs"
    HANG_RUNS=0 run_wrapper -n 1 --abort-grace 0 "${hang[@]}"
    [ "$rc" -eq 0 ] || fail "--abort-grace 0 (rc $rc)"
    pass "--abort-grace ends a mpirun still running after the ranks' verdict; the job failed, and restarts" ;;
  *) echo "usage: $0 dry_run_cpu|dry_run_gpu|dry_run_oversubscribe|bad_machinefile|np_exceeds_slots|bad_options|rank_logs|rank_logs_failure|restarts|abort_grace" >&2
     exit 2 ;;
esac
