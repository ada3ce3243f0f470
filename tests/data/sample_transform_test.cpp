// The augmentation language: parsing and its errors, output shapes, the
// presets' eval forms, each step's geometry, and determinism: a sample's
// bytes depend on (seed, epoch, index) only.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/data/sample_transform.h"

using namespace ringtrain;
using Catch::Contains;

namespace {

// A C x H x W image whose bytes depend on (c, y, x), never constant.
std::vector<std::uint8_t> image(int c, int h, int w) {
  std::vector<std::uint8_t> v(static_cast<std::size_t>(c) * h * w);
  for (int k = 0; k < c; ++k)
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        v[(k * h + y) * w + x] = static_cast<std::uint8_t>(1 + k * 80 + y * 7 + x * 3);
  return v;
}

std::vector<float> run(const SampleTransform& t, const std::vector<std::uint8_t>& img,
                       std::vector<std::size_t> shape, std::uint64_t epoch, std::uint64_t index) {
  const std::vector<std::size_t> out = t.output_shape(shape);
  std::vector<float> x(out[0] * out[1] * out[2]);
  t.apply(img.data(), shape, 1.0f, 0.0f, epoch, index, x.data());
  return x;
}

}  // namespace

TEST_CASE("specs parse with defaults written out, and bad specs name the flag") {
  CHECK(SampleTransform::parse("imagenet", 0)->describe() ==
        "random_resized_crop(224, scale=(0.08,1), ratio=(0.75,1.333)), hflip(p=0.5), "
        "normalize(mean=(0.485,0.456,0.406), std=(0.229,0.224,0.225))");
  CHECK(SampleTransform::parse("cifar", 0)->describe() ==
        "random_crop(32, padding=4), hflip(p=0.5)");
  CHECK(SampleTransform::parse(
            "random_resized_crop((96,128), scale=(0.5,1), ratio=(3/4,4/3)) + hflip(0.25)", 0)
            ->describe() ==
        "random_resized_crop((96,128), scale=(0.5,1), ratio=(0.75,1.333)), hflip(p=0.25)");
  CHECK(SampleTransform::eval_spec_of("imagenet") ==
        "resize(256), center_crop(224), normalize(mean=(0.485,0.456,0.406), "
        "std=(0.229,0.224,0.225))");
  CHECK(SampleTransform::eval_spec_of("cifar") == "none");
  CHECK(
      SampleTransform::eval_spec_of("random_crop(28, padding=2), hflip, normalize((0.5),(0.25))") ==
      "center_crop(28), normalize(mean=(0.5), std=(0.25))");
  CHECK_THROWS_WITH(SampleTransform::parse("rotate(30)", 0),
                    Contains("--augment 'rotate(30)': unknown step 'rotate'"));
  CHECK_THROWS_WITH(SampleTransform::parse("normalize((0.5),(0.2)), hflip", 0, "--eval-transform"),
                    Contains("--eval-transform") && Contains("normalize must be the last step"));
  CHECK_THROWS_WITH(SampleTransform::parse("center_crop(0)", 0),
                    Contains("sizes are positive integers"));
  CHECK_THROWS_WITH(SampleTransform::parse("hflip(p=2)", 0), Contains("0 <= p <= 1"));
  CHECK_THROWS_WITH(SampleTransform::parse("random_crop", 0), Contains("random_crop needs a size"));
  CHECK_THROWS_WITH(SampleTransform::parse("resize(32", 0), Contains("expected ',' or ')'"));
}

TEST_CASE("output shapes follow the steps, and steps that cannot fit are refused") {
  CHECK(SampleTransform::parse("imagenet", 0)->output_shape({3, 300, 400}) ==
        std::vector<std::size_t>{3, 224, 224});
  CHECK(SampleTransform::parse("resize(256)", 0)->output_shape({3, 300, 400}) ==
        std::vector<std::size_t>{3, 256, 341});
  CHECK(SampleTransform::parse("cifar", 0)->output_shape({1, 32, 32}) ==
        std::vector<std::size_t>{1, 32, 32});
  CHECK_THROWS_WITH(SampleTransform::parse("center_crop(40)", 0)->output_shape({3, 32, 32}),
                    Contains("larger than its 32x32 input"));
  CHECK_THROWS_WITH(SampleTransform::parse("imagenet", 0)->output_shape({1, 64, 64}),
                    Contains("normalize has 3 values per channel but images have 1"));
  CHECK_THROWS_WITH(SampleTransform::parse("hflip", 0)->output_shape({20}), Contains("C x H x W"));
}

TEST_CASE("random_crop with padding is a window of the zero-padded image; hflip mirrors") {
  const auto img = image(3, 8, 8);
  const auto crop = SampleTransform::parse("random_crop(8, padding=2)", 3);
  const auto flip = SampleTransform::parse("hflip(p=1)", 3);
  const auto none = SampleTransform::parse("hflip(p=0)", 3);
  std::size_t offsets_seen = 0;
  std::vector<bool> seen(25, false);
  for (std::uint64_t index = 0; index < 200; ++index) {
    const std::vector<float> x = run(*crop, img, {3, 8, 8}, 0, index);
    int found = -1;
    for (int i = 0; i <= 4 && found < 0; ++i)
      for (int j = 0; j <= 4 && found < 0; ++j) {
        bool same = true;
        for (int k = 0; k < 3 && same; ++k)
          for (int y = 0; y < 8 && same; ++y)
            for (int xx = 0; xx < 8 && same; ++xx) {
              const int sy = y + i - 2, sx = xx + j - 2;
              const float want =
                  sy < 0 || sy >= 8 || sx < 0 || sx >= 8 ? 0.0f : img[(k * 8 + sy) * 8 + sx];
              same = x[(k * 8 + y) * 8 + xx] == want;
            }
        if (same) found = i * 5 + j;
      }
    REQUIRE(found >= 0);
    if (!seen[found]) ++offsets_seen;
    seen[found] = true;
  }
  CHECK(offsets_seen == 25);  // every offset of torchvision's randint(0, 4 + 1) occurs
  const std::vector<float> m = run(*flip, img, {3, 8, 8}, 0, 1),
                           same = run(*none, img, {3, 8, 8}, 0, 1);
  for (int k = 0; k < 3; ++k)
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x) {
        CHECK(m[(k * 8 + y) * 8 + x] == img[(k * 8 + y) * 8 + 7 - x]);
        CHECK(same[(k * 8 + y) * 8 + x] == img[(k * 8 + y) * 8 + x]);
      }
}

TEST_CASE("normalize maps bytes to (byte/255 - mean) / std per channel") {
  const auto img = image(3, 4, 4);
  const auto t = SampleTransform::parse("normalize(mean=(0.1,0.2,0.3), std=(0.5,0.25,2))", 0);
  const std::vector<float> x = run(*t, img, {3, 4, 4}, 0, 0);
  const float mean[3] = {0.1f, 0.2f, 0.3f}, sd[3] = {0.5f, 0.25f, 2.0f};
  for (std::size_t i = 0; i < x.size(); ++i)
    CHECK(x[i] == Approx((img[i] / 255.0f - mean[i / 16]) / sd[i / 16]).margin(1e-6));
}

TEST_CASE("a sample's augmentation is a function of (seed, epoch, index) only") {
  const auto img = image(3, 40, 48);
  const auto t = SampleTransform::parse("random_resized_crop(24), hflip", 11);
  const auto other_seed = SampleTransform::parse("random_resized_crop(24), hflip", 12);
  const std::vector<std::size_t> shape{3, 40, 48};
  // Same triple, any order of calls: same bytes.
  const std::vector<float> a = run(*t, img, shape, 2, 17);
  run(*t, img, shape, 5, 3);
  CHECK(run(*t, img, shape, 2, 17) == a);
  CHECK(run(*t, img, shape, 3, 17) != a);
  CHECK(run(*t, img, shape, 2, 18) != a);
  CHECK(run(*other_seed, img, shape, 2, 17) != a);
}

TEST_CASE("vflip, grayscale, rotation and color_jitter: parsed, their geometry and colour") {
  CHECK(SampleTransform::parse("vflip, grayscale(p=0.2), rotation(15), color_jitter(0.4, 0.3)", 0)
            ->describe() ==
        "vflip(p=0.5), grayscale(p=0.2), rotation(15), color_jitter(brightness=0.4, "
        "contrast=0.3, saturation=0)");
  CHECK(SampleTransform::eval_spec_of("rotation(10), vflip, grayscale, color_jitter(0.2)") ==
        "grayscale");
  CHECK_THROWS_WITH(SampleTransform::parse("rotation(200)", 0), Contains("in [0, 180]"));
  CHECK_THROWS_WITH(SampleTransform::parse("color_jitter(hue=0.1)", 0),
                    Contains("color_jitter takes (brightness=B, contrast=C, saturation=S)"));
  CHECK_THROWS_WITH(SampleTransform::parse("rotate(30)", 0), Contains("did you mean 'rotation'"));

  const auto img = image(3, 6, 5);
  const std::vector<std::size_t> shape{3, 6, 5};
  const auto at = [&](const std::vector<float>& x, int k, int y, int xx) {
    return x[static_cast<std::size_t>((k * 6 + y) * 5 + xx)];
  };
  // p=1: always flipped, row y from row 5 - y.
  const auto flipped = run(*SampleTransform::parse("vflip(p=1)", 0), img, shape, 0, 0);
  for (int k = 0; k < 3; ++k)
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 5; ++x) CHECK(at(flipped, k, y, x) == img[(k * 6 + (5 - y)) * 5 + x]);
  // Every channel the luma of the pixel, rounded.
  const auto gray = run(*SampleTransform::parse("grayscale", 0), img, shape, 0, 0);
  for (int y = 0; y < 6; ++y)
    for (int x = 0; x < 5; ++x) {
      const double l = 0.299 * img[(0 * 6 + y) * 5 + x] + 0.587 * img[(1 * 6 + y) * 5 + x] +
                       0.114 * img[(2 * 6 + y) * 5 + x];
      for (int k = 0; k < 3; ++k) CHECK(at(gray, k, y, x) == static_cast<float>(std::nearbyint(l)));
    }
  // rotation(0) and color_jitter with no range leave the image as it is.
  const auto same = run(*SampleTransform::parse("none", 0), img, shape, 0, 0);
  CHECK(run(*SampleTransform::parse("rotation(0)", 0), img, shape, 3, 9) == same);
  CHECK(run(*SampleTransform::parse("color_jitter", 0), img, shape, 3, 9) == same);
  // Brightness only scales: every byte by one factor, within [0.5, 1.5].
  const auto bright =
      run(*SampleTransform::parse("color_jitter(brightness=0.5)", 4), img, shape, 1, 2);
  // The factor, read off the brightest byte that cannot saturate (170 x 1.5 < 255).
  std::size_t ref = 0;
  for (std::size_t i = 0; i < same.size(); ++i)
    if (same[i] <= 170 && same[i] > same[ref]) ref = i;
  REQUIRE(same[ref] >= 100);
  const double f = bright[ref] / same[ref];
  CHECK(f >= 0.5 - 0.01);
  CHECK(f <= 1.5 + 0.01);
  CHECK(f != 1.0);
  for (std::size_t i = 0; i < same.size(); ++i)
    CHECK(std::abs(bright[i] - std::min(255.0, std::nearbyint(same[i] * f))) <= 2.0);
}

TEST_CASE("an exact resize is written as (H,W), also when square: resize(S) is the short side") {
  CHECK(SampleTransform::parse("resize((8,8))", 0)->describe() == "resize((8,8))");
  CHECK(SampleTransform::eval_spec_of("resize((8,8)), hflip") == "resize((8,8))");
  // Images of varying size (0 x 0): the derived evaluation still fixes the size.
  CHECK(SampleTransform::parse(SampleTransform::eval_spec_of("resize((8,8))"), 0)
            ->output_shape({3, 0, 0}) == std::vector<std::size_t>{3, 8, 8});
}

TEST_CASE("the new random steps are functions of (seed, epoch, index) only") {
  const auto img = image(3, 24, 20);
  const std::vector<std::size_t> shape{3, 24, 20};
  const auto t = SampleTransform::parse(
      "rotation(30), vflip, color_jitter(0.4, 0.4, 0.4), grayscale(p=0.5)", 7);
  const std::vector<float> a = run(*t, img, shape, 1, 5);
  run(*t, img, shape, 2, 6);
  CHECK(run(*t, img, shape, 1, 5) == a);
  CHECK(run(*t, img, shape, 2, 5) != a);
  CHECK(run(*t, img, shape, 1, 6) != a);
  CHECK(t->random());
  CHECK_FALSE(SampleTransform::parse("grayscale", 7)->random());
}
