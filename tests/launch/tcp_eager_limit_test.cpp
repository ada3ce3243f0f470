// The TCP eager limit chosen before MPI_Init: raised for the ring's chunks
// unless the user chose one.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <string>

#include "launch/tcp_eager_limit.h"

using namespace ringtrain;

namespace {
const char* kVar = "OMPI_MCA_btl_tcp_eager_limit";
}

TEST_CASE("a ring chunk and its headers fit the eager limit, never below Open MPI's default") {
  CHECK(tcp_eager_limit_for(std::size_t{256} << 10) == (std::size_t{256} << 10) + 1024);
  CHECK(tcp_eager_limit_for(std::size_t{1} << 20) == (std::size_t{1} << 20) + 1024);
  CHECK(tcp_eager_limit_for(std::size_t{16} << 10) == std::size_t{64} << 10);
}

TEST_CASE("unset, the limit is raised for the default chunk") {
  unsetenv(kVar);
  choose_tcp_eager_limit();
  const char* v = std::getenv(kVar);
  REQUIRE(v != nullptr);
  CHECK(std::string(v) == std::to_string(kDefaultRingChunkBytes + 1024));
  unsetenv(kVar);
}

TEST_CASE("the user's own limit is never overridden") {
  setenv(kVar, "4096", 1);
  choose_tcp_eager_limit();
  CHECK(std::string(std::getenv(kVar)) == "4096");
  unsetenv(kVar);
}
