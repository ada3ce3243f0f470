// The MPI communicators that the topology builds, for the backends in src/comm.
// Internal: public headers stay free of mpi.h.
#pragma once

#include <mpi.h>

namespace ringtrain::mpi_context {

// MPI_COMM_WORLD, duplicated so that ringtrain's traffic never matches a user's.
MPI_Comm world();
// The ranks sharing this node's memory (MPI_COMM_TYPE_SHARED).
MPI_Comm local();
// One communicator per local rank index across nodes: ranks with local rank i
// on every node. The hierarchical shm all-reduce runs its inter-node ring here.
MPI_Comm cross_node();

}  // namespace ringtrain::mpi_context
