# Sourced by ringtrain's scripts: the environment an mpirun job needs here.
# Open MPI refuses to run as root unless told through the environment; a root
# user's job script has to do the same, so this is what we do too.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# One BLAS thread per rank: ranks are the parallelism.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# Open MPI's mpi_yield_when_idle is left to its default: Open MPI yields by
# itself where it knows the ranks oversubscribe the cores (as in CI). Forced on,
# every idle MPI_Test beside a busy thread on the same core gives the core away
# until the next scheduler tick (4 ms at HZ=250), and an all-reduce overlapped
# with backward then waits ticks instead of microseconds.
# Open MPI's single-copy path (CMA) is left to its default: ringtrain turns it
# off by itself before MPI_Init where a container forbids process_vm_readv.
RINGTRAIN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export RINGTRAIN_ROOT
# The one Python that ringtrain's tests and scripts run: Debian's, which
# install-deps.sh gives PIL, h5py, NumPy and PyTorch. Never the `python3` first
# on PATH: a pyenv or conda one there lacks those modules ("No module named
# 'PIL'"). Set RINGTRAIN_PYTHON to use another (CMake takes it from here too).
if [ -z "${RINGTRAIN_PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ]; then
    RINGTRAIN_PYTHON=/usr/bin/python3
  else
    RINGTRAIN_PYTHON=$(command -v python3 || echo python3)
  fi
fi
export RINGTRAIN_PYTHON
