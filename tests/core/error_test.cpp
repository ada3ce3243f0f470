#include <catch2/catch.hpp>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/input_error.h"
#include "ringtrain/core/log.h"

using namespace ringtrain;

TEST_CASE("RT_CHECK throws Error with the message, and file:line apart from it") {
  try {
    RT_CHECK(1 + 1 == 3, "bad value {} for --batch", 7);
    FAIL("did not throw");
  } catch (const Error& e) {
    // What a user reads names the flag, not a source file.
    CHECK(std::string(e.what()) == "bad value 7 for --batch");
    CHECK(e.where().find("tests/core/error_test.cpp:") == 0);
  }
}

TEST_CASE("as_input_error keeps the message and the place") {
  try {
    as_input_error([] { RT_CHECK(false, "--data x.h5 does not exist"); });
    FAIL("did not throw");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "--data x.h5 does not exist");
    CHECK(e.where().find("tests/core/error_test.cpp:") == 0);
  }
}

TEST_CASE("RT_CHECK_EQ prints both values") {
  int a = 3, b = 4;
  try {
    RT_CHECK_EQ(a, b, "count");
    FAIL("did not throw");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("got 3 vs 4") != std::string::npos);
  }
}

TEST_CASE("rank prefix names rank and host") {
  set_log_identity({5, 8, "node-a"});
  CHECK(rank_prefix() == "[rank 5/node-a]");
  set_log_identity({0, 1, "?"});
}

TEST_CASE("BufferView slices count elements, not bytes") {
  double data[10] = {};
  BufferView v = view_of(data, 10);
  CHECK(v.bytes() == 80);
  BufferView s = v.slice(3, 4);
  CHECK(s.as<double>() == data + 3);
  CHECK(s.count == 4);
}
