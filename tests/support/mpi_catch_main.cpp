// Catch2 main for multi-rank tests: every rank runs every test case; the job
// fails if any rank fails. Output of ranks other than 0 is kept only when they
// fail, so a failing rank is always visible.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>

#include "ringtrain/core/error.h"
#include "ringtrain/core/fatal.h"
#include "tests/support/mpi_test.h"

namespace ringtrain::test {
namespace {
Topology* g_topology = nullptr;
}
const Topology& topology() {
  return *g_topology;
}
}  // namespace ringtrain::test

int main(int argc, char** argv) {
  using namespace ringtrain;
  MpiSession mpi(&argc, &argv);
  Topology topo = Topology::discover({DeviceRequest::cpu, false});
  test::g_topology = &topo;
  Catch::Session session;
  int rc = session.applyCommandLine(argc, argv);
  if (rc != 0) return rc;
  int failed = 0;
  try {
    failed = session.run() != 0 ? 1 : 0;
  } catch (const std::exception& e) {
    fatal(std::string("test threw outside a test case: ") + e.what());
  }
  int any_failed = 0;
  MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (topo.rank() == 0 && any_failed)
    std::fprintf(stderr, "[rank 0] some rank failed its tests (see output above)\n");
  return any_failed;
}
