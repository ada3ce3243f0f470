#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <set>
#include <string>

#include "launch/mpi_context.h"
#include "tests/support/mpi_test.h"

using namespace ringtrain;

TEST_CASE("world, local and node placement are consistent") {
  const Topology& t = test::topology();
  int world_rank = -1, world_size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  CHECK(t.rank() == world_rank);
  CHECK(t.world_size() == world_size);
  // mpirun on one machine: everything is one node.
  CHECK(t.node_count() == 1);
  CHECK(t.node() == 0);
  CHECK(t.local_size() == world_size);
  CHECK(t.local_rank() == world_rank);
  REQUIRE(t.placements().size() == static_cast<size_t>(world_size));

  // Every rank sees the same table; local ranks on a node are 0..local_size-1.
  std::set<int> locals;
  for (const auto& p : t.placements()) {
    CHECK(p.node < t.node_count());
    CHECK(p.local_size == world_size);
    CHECK(p.device == "cpu");
    locals.insert(p.local_rank);
  }
  CHECK(locals.size() == static_cast<size_t>(world_size));
  CHECK(*locals.rbegin() == world_size - 1);

  int cross_size = 0;
  MPI_Comm_size(mpi_context::cross_node(), &cross_size);
  CHECK(cross_size == t.node_count());
}

TEST_CASE("the table has a row per rank") {
  const Topology& t = test::topology();
  const std::string table = t.table();
  int rows = 0;
  for (char c : table) rows += c == '\n';
  CHECK(rows == t.world_size() + 1);
  CHECK(table.find("local_rank") != std::string::npos);
}

// Read through MPI's tool interface, what the library itself uses: Open MPI
// yields when idle only where mpirun starts more ranks than the node has
// slots (it tells the ranks with OMPI_MCA_mpi_oversubscribe). Nothing of
// ringtrain's, the test environment included, forces the yield on: with it,
// each idle poll of a ring step gives the core away until the next scheduler
// tick (see launch/env.sh).
TEST_CASE("Open MPI yields when idle only where the ranks oversubscribe the node") {
  int provided = 0;
  REQUIRE(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS);
  int index = -1;
  INFO("Open MPI, ringtrain's MPI, names this variable mpi_yield_when_idle");
  REQUIRE(MPI_T_cvar_get_index("mpi_yield_when_idle", &index) == MPI_SUCCESS);
  MPI_T_cvar_handle handle;
  int count = 0;
  REQUIRE(MPI_T_cvar_handle_alloc(index, nullptr, &handle, &count) == MPI_SUCCESS);
  // Open MPI hands a bool variable over as MPI_C_BOOL (one byte): read it into
  // zeroed room wide enough for any integer type.
  long long value = 0;
  REQUIRE(MPI_T_cvar_read(handle, &value) == MPI_SUCCESS);
  MPI_T_cvar_handle_free(&handle);
  MPI_T_finalize();
  const char* over = std::getenv("OMPI_MCA_mpi_oversubscribe");
  const bool oversubscribed = over != nullptr && std::string(over) == "1";
  INFO("OMPI_MCA_mpi_oversubscribe=" << (over != nullptr ? over : "(unset)"));
  CHECK((value != 0) == oversubscribed);
}
