#!/usr/bin/env bash
# kill_rank_after.sh RANK SECONDS PROGRAM [ARGS...]
# Fault injection for multi-rank tests: every rank execs PROGRAM; the rank whose
# OMPI_COMM_WORLD_RANK is RANK is sent SIGKILL SECONDS after it started, as if
# the node's OOM killer or a hardware fault took it. (exec keeps the PID, so the
# launcher sees the program itself die on signal 9.)
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: kill_rank_after.sh RANK SECONDS PROGRAM [ARGS...]" >&2; exit 2; }
victim=$1; delay=$2; shift 2
rank=${OMPI_COMM_WORLD_RANK:?kill_rank_after.sh runs under mpirun}
if [ "$rank" = "$victim" ]; then
  self=$$
  ( sleep "$delay"; echo "kill_rank_after: SIGKILL to rank $rank (pid $self) on $(hostname)" >&2
    kill -9 "$self" ) &
fi
exec "$@"
