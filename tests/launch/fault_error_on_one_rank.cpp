// Raises ringtrain::Error on the rank given in argv[1] while every other rank
// waits in a barrier that will never complete. The failure policy must end the
// whole job: the failing rank prints its message and calls MPI_Abort.
#include <mpi.h>

#include <cstdlib>
#include <string>

#include "ringtrain/core/check.h"
#include "ringtrain/core/fatal.h"
#include "ringtrain/launch/topology.h"

int main(int argc, char** argv) {
  using namespace ringtrain;
  MpiSession mpi(&argc, &argv);
  const int failing_rank = argc > 1 ? std::atoi(argv[1]) : 1;
  try {
    Topology t = Topology::discover({DeviceRequest::cpu, false});
    if (t.rank() == failing_rank) RT_CHECK(false, "injected failure on rank {}", failing_rank);
    MPI_Barrier(MPI_COMM_WORLD);
  } catch (const Error& e) {
    fatal(e.what());
  }
  return 0;
}
