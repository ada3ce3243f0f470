// The NCCL version rule, on CPU: same major, loaded minor >= compiled minor.
#include <catch2/catch.hpp>

#include "comm/nccl_version.h"

using namespace ringtrain::comm_detail;

TEST_CASE("NCCL version codes decode in both schemes") {
  CHECK(nccl_version_string(21803) == "2.18.3");
  CHECK(nccl_version_string(20900) == "2.9.0");
  CHECK(nccl_version_string(2708) == "2.7.8");
  CHECK(nccl_version_string(30001) == "3.0.1");
}

TEST_CASE("the loaded NCCL must have the compiled major and at least the compiled minor") {
  CHECK(nccl_version_compatible(21803, 21803).ok);
  CHECK(nccl_version_compatible(21803, 21801).ok);  // patch level is free
  CHECK(nccl_version_compatible(21803, 22105).ok);  // newer minor
  CHECK(nccl_version_compatible(21803, 21803).message.empty());

  NcclVersionCheck older = nccl_version_compatible(21803, 21405);
  CHECK_FALSE(older.ok);
  CHECK_THAT(older.message, Catch::Contains("loaded NCCL library is 2.14.5") &&
                                Catch::Contains("compiled against NCCL 2.18.3") &&
                                Catch::Contains("2.x with x >= 18"));
  CHECK_FALSE(nccl_version_compatible(21803, 30000).ok);  // another major
  CHECK_FALSE(nccl_version_compatible(21803, 2708).ok);   // old scheme, older minor
  CHECK_FALSE(nccl_version_compatible(21803, 0).ok);      // nothing reported
}
