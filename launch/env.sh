# Sourced by ringtrain's scripts: the environment an mpirun job needs here.
# Open MPI refuses to run as root unless told through the environment; a root
# user's job script has to do the same, so this is what we do too.
if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# One BLAS thread per rank: ranks are the parallelism.
export OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-1}
# Oversubscribed ranks (more ranks than cores, as in CI) must yield the core
# while they wait, or a spinning rank starves the one it waits for.
export OMPI_MCA_mpi_yield_when_idle=${OMPI_MCA_mpi_yield_when_idle:-1}
# Open MPI's single-copy path (CMA) is left to its default: ringtrain turns it
# off by itself before MPI_Init where a container forbids process_vm_readv.
RINGTRAIN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export RINGTRAIN_ROOT
