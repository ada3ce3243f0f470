// Every bad-input case names the file, the split and the dataset.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>

#include "ringtrain/core/error.h"
#include "ringtrain/data/dataset.h"
#include "tests/data/data_test_files.h"

using namespace ringtrain;
using Catch::Contains;

namespace {
std::string dir() {
  const char* d = std::getenv("RINGTRAIN_TEST_DATA_DIR");
  return std::string(d ? d : ".") + "/dataset-errors";
}
// (std::filesystem::path: GCC 12 warns falsely on string + in some inlines.)
std::string at(const std::string& name) {
  return (std::filesystem::path(dir()) / name).string();
}
std::string broken(const char* name, test::Breakage b) {
  std::filesystem::create_directories(dir());
  const std::string path = at(std::string(name) + ".h5");
  test::write_broken_dataset(path, b);
  return path;
}
}  // namespace

TEST_CASE("missing file, split and dataset") {
  CHECK_THROWS_WITH(Dataset::open(at("nothere.h5"), "train"),
                    Contains("nothere.h5 does not exist") && Contains("split /train"));
  const std::string no_split = broken("no_split", test::Breakage::no_split);
  CHECK_THROWS_WITH(Dataset::open(no_split, "train"),
                    Contains("no_split.h5: no split /train") && Contains("splits present: test"));
  const std::string no_x = broken("no_x", test::Breakage::no_x);
  CHECK_THROWS_WITH(Dataset::open(no_x, "train"),
                    Contains("no_x.h5: no dataset 'x' in split /train"));
  CHECK_THROWS_WITH(Dataset::open(no_x, "a/b"), Contains("bad split name"));
}

TEST_CASE("x and y lengths, labels, dtype and attributes") {
  CHECK_THROWS_WITH(Dataset::open(broken("xy", test::Breakage::xy_mismatch), "train"),
                    Contains("xy.h5:/train: x has 40 samples but y has 39 labels"));
  CHECK_THROWS_WITH(Dataset::open(broken("label", test::Breakage::label_range), "train"),
                    Contains("label.h5:/train/y: label 10 at index 17 is outside [0, 10)"));
  CHECK_THROWS_WITH(Dataset::open(broken("dtype", test::Breakage::bad_dtype), "train"),
                    Contains("dtype.h5:/train/x: unsupported dtype int16"));
  CHECK_THROWS_WITH(Dataset::open(broken("nc", test::Breakage::no_num_classes), "train"),
                    Contains("nc.h5:/train: missing attribute num_classes"));
}

TEST_CASE("truncated and corrupt files") {
  CHECK_THROWS_WITH(
      Dataset::open(broken("truncated", test::Breakage::truncated), "train"),
      Contains("truncated.h5 (split /train) cannot be opened") && Contains("truncated"));
  CHECK_THROWS_WITH(Dataset::open(broken("garbage", test::Breakage::not_hdf5), "train"),
                    Contains("garbage.h5 (split /train) is not an HDF5 file"));
}

TEST_CASE("a sample shape that does not match the model names both shapes") {
  std::filesystem::create_directories(dir());
  const std::string path = at("good.h5");
  test::write_good_dataset(path, 10, 3, {1, 4, 4}, 5);
  Dataset ds = Dataset::open(path, "train");
  CHECK_NOTHROW(ds.check_sample_shape({1, 4, 4}));
  CHECK_THROWS_WITH(ds.check_sample_shape({1, 28, 28}),
                    Contains("good.h5:/train/x") && Contains("1x4x4") && Contains("1x28x28"));
  CHECK_THROWS_WITH(ds.check_sample_shape({16}), Contains("1x4x4") && Contains("16"));
}

TEST_CASE("shape parsing") {
  CHECK(parse_shape("1,28,28", "--shape") == std::vector<std::size_t>{1, 28, 28});
  CHECK(parse_shape("3x32x32", "--shape") == std::vector<std::size_t>{3, 32, 32});
  CHECK(parse_shape("20", "--shape") == std::vector<std::size_t>{20});
  CHECK_THROWS_WITH(parse_shape("1,,2", "--shape"), Contains("--shape: bad shape '1,,2'"));
  CHECK_THROWS_WITH(parse_shape("0,2", "--shape"), Contains("positive"));
  CHECK_THROWS_WITH(parse_shape("", "--shape"), Contains("empty"));
}
