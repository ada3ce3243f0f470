#include <catch2/catch.hpp>

#include "ringtrain/core/dtype.h"
#include "ringtrain/core/error.h"

using namespace ringtrain;

TEST_CASE("dtype names round-trip and sizes are right") {
  for (DType t : kAllDTypes) CHECK(parse_dtype(dtype_name(t)) == t);
  CHECK(dtype_size(DType::f16) == 2);
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(dtype_size(DType::i64) == 8);
  CHECK(dtype_is_float(DType::bf16));
  CHECK_FALSE(dtype_is_float(DType::i32));
}

TEST_CASE("unknown dtype names the value") {
  CHECK_THROWS_WITH(parse_dtype("f8"), Catch::Contains("unknown dtype 'f8'"));
}
