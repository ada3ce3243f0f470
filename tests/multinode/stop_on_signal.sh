#!/usr/bin/env bash
# stop_on_signal.sh SECONDS_OF_WORK: a stand-in rank for signal tests. It runs
# up to 120 s; on SIGUSR1 or SIGTERM it "checkpoints" for SECONDS_OF_WORK (longer
# than the 1 s mpirun leaves a rank after SIGTERM), says so, and exits 0, as
# ringtrain train does with a real checkpoint.
set -uo pipefail
work=${1:-2}
rank=${OMPI_COMM_WORLD_RANK:?stop_on_signal.sh runs under mpirun}
stop() {
  sleep "$work"
  echo "stop_on_signal: rank $rank on $(hostname): SIG$1, checkpointed in ${work}s, stopped cleanly"
  exit 0
}
trap 'stop USR1' USR1
trap 'stop TERM' TERM
echo "stop_on_signal: rank $rank on $(hostname) running"
for ((i = 0; i < 1200; i++)); do sleep 0.1; done
echo "stop_on_signal: rank $rank: no signal within 120 s"
exit 1
