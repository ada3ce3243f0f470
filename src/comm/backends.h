// The backend constructors behind make_communicator. Internal to src/comm.
#pragma once

#include <memory>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/launch/topology.h"

namespace ringtrain::comm_detail {

std::unique_ptr<Communicator> make_mpi_communicator(const Topology& topology,
                                                    const CommOptions& options);
std::unique_ptr<Communicator> make_ring_communicator(const Topology& topology,
                                                     const CommOptions& options);
std::unique_ptr<Communicator> make_shm_communicator(const Topology& topology,
                                                    const CommOptions& options);
// CUDA builds: src/comm/cuda/nccl_communicator.cpp; CPU-only builds:
// src/comm/nccl_communicator_nocuda.cpp, which throws.
std::unique_ptr<Communicator> make_nccl_communicator(const Topology& topology,
                                                     const CommOptions& options);
bool nccl_compiled();
// GPU buffers through a host backend (shm, ring or mpi), staged through pinned
// memory: for ranks that share a GPU. CUDA builds only.
std::unique_ptr<Communicator> make_staged_communicator(std::string_view inner_kind,
                                                       const Topology& topology,
                                                       const CommOptions& options);

}  // namespace ringtrain::comm_detail
