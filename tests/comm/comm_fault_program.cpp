// Faults the collectives must turn into a quick, clear end of the whole job:
//   comm_fault_program never_joins <backend> <timeout_s>
//       rank 1 never calls the all-reduce; the others must time out, name
//       rank 1, and the job must end non-zero (no hang).
//   comm_fault_program count_mismatch <backend>
//       rank 1 passes one element more than the others: a clear error.
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/fatal.h"
#include "ringtrain/launch/topology.h"

int main(int argc, char** argv) {
  using namespace ringtrain;
  MpiSession mpi(&argc, &argv);
  if (argc < 3) fatal("usage: comm_fault_program never_joins|count_mismatch <backend> [timeout_s]");
  const std::string mode = argv[1], backend = argv[2];
  try {
    Topology topo = Topology::discover({DeviceRequest::cpu, false});
    CommOptions options;
    options.timeout_seconds = argc > 3 ? std::atof(argv[3]) : 10.0;
    auto comm = make_communicator(backend, topo, options);
    std::vector<float> data(100003, 0.25f * static_cast<float>(topo.rank() + 1));
    if (mode == "never_joins") {
      if (topo.rank() == 1) {
        // Alive but absent: the peers must not wait for it forever.
        std::this_thread::sleep_for(std::chrono::seconds(120));
        return 0;
      }
      comm->allreduce(view_of(data.data(), data.size()), view_of(data.data(), data.size()),
                      ReduceOp::sum);
    } else if (mode == "count_mismatch") {
      const std::size_t count = data.size() - (topo.rank() == 1 ? 0 : 1);
      comm->allreduce(view_of(data.data(), count), view_of(data.data(), count), ReduceOp::sum);
    } else {
      fatal("unknown mode " + mode);
    }
  } catch (const Error& e) {
    fatal(e.what());
  }
  return 0;
}
