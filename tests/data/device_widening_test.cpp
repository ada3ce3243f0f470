// A GPU rank's loader ships uint8 batches and widens them on the device. What
// the device computes is kernels::widen_element on the bytes read_bytes()
// gives, with the widening device_widening() chooses: here the same arithmetic
// runs on the CPU (widen_bytes), and must give read()'s floats bit for bit,
// for plain uint8 data, transforms with and without normalize, cached reads,
// several loader threads and repeated indices.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "data/device_widening.h"
#include "data/pixel_conversion.h"
#include "kernels/widen_bytes.cuh"
#include "ringtrain/core/error.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/sample_transform.h"
#include "tests/data/data_test_files.h"
#include "tests/support/temp_dir.h"

using namespace ringtrain;
using Catch::Contains;

namespace {

// read() against read_bytes() + the widening, for `indices` at `epoch`.
void check_widening_matches_read(Dataset& d, const std::vector<std::uint64_t>& indices,
                                 std::uint64_t epoch) {
  const std::size_t e = d.sample_elements(), n = indices.size() * e;
  std::vector<float> want(n);
  std::vector<std::int32_t> y_want(indices.size()), y_got(indices.size());
  d.read(indices, want.data(), y_want.data(), epoch);
  std::vector<std::uint8_t> bytes(n);
  d.read_bytes(indices, bytes.data(), y_got.data(), epoch);
  const auto w = device_widening(d);
  REQUIRE(w.has_value());
  std::vector<float> got(n, -1.0f);
  widen_bytes(bytes.data(), got.data(), n, *w);
  CHECK(y_got == y_want);
  CHECK(std::memcmp(got.data(), want.data(), n * sizeof(float)) == 0);
  // The bytes are what the floats came from, not a copy of something else.
  std::size_t distinct = 0;
  for (std::size_t i = 1; i < n; ++i) distinct += bytes[i] != bytes[i - 1];
  CHECK(distinct > n / 4);
}

}  // namespace

TEST_CASE("one element's widening: the channel of its plane, product rounded before the sum") {
  kernels::ChannelWidening w;
  w.channels = 3;
  w.plane = 4;
  const float scale[3] = {0.5f, 1.0f / 255.0f, 2.0f}, offset[3] = {1.0f, -0.25f, -3.0f};
  for (int c = 0; c < 3; ++c) {
    w.scale[c] = scale[c];
    w.offset[c] = offset[c];
  }
  std::vector<std::uint8_t> in(2 * 3 * 4);  // two samples of 3 planes of 4
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint8_t>(7 + 11 * i);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const int c = static_cast<int>((i % 12) / 4);
    const float product = static_cast<float>(in[i]) * scale[c];  // rounded to float here
    CHECK(kernels::widen_element(in.data(), i, w) == product + offset[c]);
  }
  std::vector<float> out(in.size());
  widen_bytes(in.data(), out.data(), in.size(), w);
  for (std::size_t i = 0; i < in.size(); ++i)
    CHECK(out[i] == kernels::widen_element(in.data(), i, w));
}

TEST_CASE("uint8 batches widened as a GPU rank widens them equal read()'s floats") {
  test::TempDir dir("device-widening");
  const std::string path = dir.str() + "/images.h5";
  test::write_good_dataset(path, 37, 5, {3, 12, 10}, 4);  // scale 1/255, offset -0.5
  const std::vector<std::uint64_t> indices{5, 0, 36, 5, 17, 2, 33, 9, 9, 21};

  SECTION("no transform: one scale and offset for the whole sample") {
    Dataset d = Dataset::open(path, "train");
    const auto w = device_widening(d);
    REQUIRE(w.has_value());
    CHECK(w->channels == 1);
    CHECK(w->scale[0] == d.scale());
    CHECK(w->offset[0] == d.offset());
    check_widening_matches_read(d, indices, 0);
  }
  SECTION("a transform with normalize, on 3 loader threads, cached and not") {
    for (bool cache : {false, true}) {
      Dataset d = Dataset::open(path, "train");
      if (cache) REQUIRE(d.enable_cache(1 << 20));
      d.set_transform(SampleTransform::parse("random_crop(8, padding=2), hflip, "
                                             "normalize(mean=(0.5,0.4,0.3), std=(0.25,0.2,0.3))",
                                             11),
                      3);
      const auto w = device_widening(d);
      REQUIRE(w.has_value());
      CHECK(w->channels == 3);
      CHECK(w->plane == 64);
      CHECK(w->scale[1] == 1.0f / (255.0f * 0.2f));
      CHECK(w->offset[2] == -0.3f / 0.3f);
      for (std::uint64_t epoch : {0u, 4u}) check_widening_matches_read(d, indices, epoch);
    }
  }
  SECTION("a transform without normalize keeps the dataset's scale and offset per channel") {
    Dataset d = Dataset::open(path, "test");
    d.set_transform(SampleTransform::parse("center_crop(6), resize(9)", 1), 2);
    const auto w = device_widening(d);
    REQUIRE(w.has_value());
    CHECK(w->channels == 3);
    CHECK(w->scale[2] == d.scale());
    CHECK(w->offset[0] == d.offset());
    check_widening_matches_read(d, {4, 3, 2, 1, 0}, 2);
  }
}

TEST_CASE("float data crosses as floats; other uint8 data as bytes") {
  test::TempDir dir("device-widening-floats");
  const std::string floats = dir.str() + "/floats.h5";
  test::write_broken_dataset(floats, test::Breakage::nonfinite);  // float32 x
  Dataset f = Dataset::open(floats, "train");
  CHECK_FALSE(f.reads_bytes());
  CHECK_FALSE(device_widening(f).has_value());
  std::vector<std::uint8_t> bytes(f.sample_elements());
  CHECK_THROWS_WITH(f.read_bytes(std::vector<std::uint64_t>{0}, bytes.data(), nullptr),
                    Contains("float32 samples have no bytes to read"));

  // Any other uint8 data crosses as bytes: without a transform (5 planes
  // here, which no transform takes) it is one scale and offset.
  const std::string wide = dir.str() + "/wide.h5";
  test::write_good_dataset(wide, 8, 2, {5, 4, 4}, 3);
  Dataset d = Dataset::open(wide, "train");
  const auto w = device_widening(d);
  REQUIRE(w.has_value());
  CHECK(w->channels == 1);
  check_widening_matches_read(d, {7, 0, 3}, 0);
}
