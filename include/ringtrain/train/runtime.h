// Start-up for a program with its own training loop: MPI, the topology (world
// and local ranks, nodes), this rank's device, the communicator for gradients
// and a host communicator for control data. One object:
//
//   int main(int argc, char** argv) {
//     return ringtrain::run_guarded([&] {
//       ringtrain::Runtime rt(&argc, &argv);   // collective
//       ... rt.rank(), rt.device(), rt.comm() ...
//       return 0;
//     });
//   }
//
// run_guarded applies ringtrain's failure policy: an Error on any rank prints
// its message with the rank and ends the whole job (MPI_Abort), so one bad rank
// never leaves the others waiting in a collective.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/launch/topology.h"
#include "ringtrain/sync/run_agreement.h"

namespace ringtrain {

struct RuntimeOptions {
  std::string backend = "auto";  // auto | nccl | shm | ring | mpi, as `ringtrain train --backend`
  TopologyOptions topology;      // device choice (auto, cpu, cuda) and GPU sharing
  CommOptions comm;              // timeouts and backend tuning
};

class Runtime {
 public:
  // Collective over the world. Throws Error (naming the rank) when MPI, the
  // device or the backend cannot be set up.
  Runtime(int* argc, char*** argv, const RuntimeOptions& options = {});
  // Finalizes MPI, except while an exception unwinds: then the session is left
  // for run_guarded's abort, since a collective finalize could wait forever.
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const Topology& topology() const { return *topology_; }
  int rank() const { return topology_->rank(); }
  int world_size() const { return topology_->world_size(); }
  Device device() const { return topology_->device(); }
  // The backend named in the options: all-reduce gradients with it. Its
  // allocate() gives buffers it reduces best (the shm window: no copy).
  Communicator& comm() { return *comm_; }
  // A host (CPU) communicator for small control data: flags, counts, hashes.
  Communicator& control() { return *control_; }
  // Collective: every rank passes the same field names; any value that differs
  // is an Error naming the field and the ranks (as `ringtrain train` does with
  // its start-up signature). The registered layer types are always compared.
  void agree(std::vector<SignatureField> fields);

 private:
  struct Mpi;
  std::unique_ptr<Mpi> mpi_;
  std::unique_ptr<Topology> topology_;
  std::unique_ptr<Communicator> control_;
  std::unique_ptr<Communicator> comm_;
};

// Runs body under the failure policy and returns its exit code; an Error (or
// any exception) on any rank ends the job with the message and the rank.
int run_guarded(const std::function<int()>& body);

}  // namespace ringtrain
