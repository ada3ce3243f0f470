// Named-tensor checkpoints of a program's own loop: round trip with the
// cursor, the newest of a directory, the cursor converted to another global
// batch (or refused), and a mismatching tensor or tag refused.
#include <catch2/catch.hpp>

#include <filesystem>

#include "ringtrain/train/tensor_checkpoint.h"
#include "tests/support/temp_dir.h"

using namespace ringtrain;
namespace fs = std::filesystem;
using ringtrain::test::TempDir;

TEST_CASE("named tensors and the cursor round-trip; the cursor follows the global batch") {
  TempDir dir("tensor-ckpt");
  std::vector<float> w{1, 2, 3, 4, 5, 6}, b{-1, -2};
  const std::vector<NamedTensor> saved{{"fc.weight", {2, 3}, w.data()}, {"fc.bias", {2}, b.data()}};
  CHECK(load_tensor_checkpoint(dir.path.string(), saved, 64) == std::nullopt);  // none yet
  // Rank 1 writes nothing.
  save_tensor_checkpoint(1, dir.path.string(), {10, {0, 10}, 64}, saved, "mlp");
  CHECK_FALSE(fs::exists(dir.path / "ckpt-10.h5"));
  save_tensor_checkpoint(0, dir.path.string(), {10, {0, 10}, 64}, saved, "mlp");
  save_tensor_checkpoint(0, dir.path.string(), {12, {1, 4}, 64}, saved, "mlp");

  std::vector<float> w2(6, 0), b2(2, 0);
  const std::vector<NamedTensor> into{{"fc.weight", {2, 3}, w2.data()},
                                      {"fc.bias", {2}, b2.data()}};
  const auto latest = load_tensor_checkpoint(dir.path.string(), into, 64, "mlp");
  REQUIRE(latest);
  CHECK(latest->step == 12);
  CHECK(latest->cursor == DataCursor{1, 4});
  CHECK(w2 == w);
  CHECK(b2 == b);
  // Global batch 64 -> 128: sample position 4 * 64 = 2 * 128.
  const auto bigger = load_tensor_checkpoint((dir.path / "ckpt-12.h5").string(), into, 128, "mlp");
  CHECK(bigger->cursor == DataCursor{1, 2});
  CHECK_THROWS_WITH(load_tensor_checkpoint((dir.path / "ckpt-12.h5").string(), into, 96, "mlp"),
                    Catch::Contains("96"));
  CHECK_THROWS_WITH(load_tensor_checkpoint(dir.path.string(), into, 64, "cnn"),
                    Catch::Contains("ckpt-12.h5"));
  std::vector<float> wrong(4);
  CHECK_THROWS_WITH(
      load_tensor_checkpoint(dir.path.string(), {{"fc.weight", {2, 2}, wrong.data()}, into[1]}, 64,
                             "mlp"),
      Catch::Contains("fc.weight"));
}
