// The control channel: a host communicator for the few small messages a run
// exchanges besides gradients (start-up signature, stop flag, loss and
// evaluation sums, replica checksums, trace gathering). It is always the MPI
// backend over host memory, so it exists beside any gradient backend,
// NCCL included, on GPU and CPU ranks alike.
#pragma once

#include <memory>

#include "ringtrain/comm/communicator.h"

namespace ringtrain {

std::unique_ptr<Communicator> make_control_communicator(const Topology& topology,
                                                        const CommOptions& options = {});

}  // namespace ringtrain
