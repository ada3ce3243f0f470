// Mixup and CutMix (--augment's batch steps): parsing and its errors, the
// CutMix box and its recomputed lam, the partner permutation, the Beta
// draws, determinism in (seed, step, rank), and the mixed batch itself.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/data/batch_mix.h"
#include "ringtrain/data/sample_transform.h"

using namespace ringtrain;
using Catch::Contains;

namespace {

// A batch whose floats depend on (row, element), never constant.
std::vector<float> batch(std::size_t rows, std::size_t sample) {
  std::vector<float> x(rows * sample);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = 0.25f + static_cast<float>((i * 37) % 101) / 7.0f - static_cast<float>(i / sample);
  return x;
}

struct Mixed {
  std::vector<float> x;
  std::vector<std::int32_t> second;
};

Mixed mix(const BatchMixer& m, const BatchMixDraw& d, const std::vector<float>& x,
          const std::vector<std::int32_t>& y) {
  const std::size_t rows = y.size();
  Mixed out{std::vector<float>(x.size(), -1.0f), std::vector<std::int32_t>(rows, -1)};
  m.apply(d, view_of(x.data(), x.size()), view_of(y.data(), y.size()), rows,
          view_of(out.x.data(), out.x.size()), view_of(out.second.data(), rows));
  return out;
}

}  // namespace

TEST_CASE("batch steps: parsed from --augment, last, once each, refused in evaluation",
          "[augment][mixup]") {
  const BatchMixSpec both =
      SampleTransform::batch_mix_of("random_crop(32, padding=4), hflip, mixup(alpha=0.2), cutmix");
  CHECK(both.mixup_alpha == 0.2);
  CHECK(both.cutmix_alpha == 1.0);
  CHECK(both.describe() == "mixup(alpha=0.2), cutmix(alpha=1)");
  CHECK(SampleTransform::batch_mix_of("mixup(1/2)").mixup_alpha == 0.5);
  CHECK_FALSE(SampleTransform::batch_mix_of("cifar").any());

  // The transform itself is the per-sample part; the batch steps ride along.
  const auto t = SampleTransform::parse("hflip, cutmix(alpha=0.5)", 0);
  CHECK(t->describe() == "hflip(p=0.5)");
  CHECK(t->batch_mix().cutmix_alpha == 0.5);
  CHECK_FALSE(t->per_sample_empty());
  CHECK(SampleTransform::parse("mixup", 0)->per_sample_empty());

  // Evaluation never mixes: the derived eval transform drops them.
  CHECK(SampleTransform::eval_spec_of("cifar, mixup(alpha=0.2)") == "none");
  CHECK(SampleTransform::eval_spec_of("random_crop(32, padding=4), hflip, cutmix") ==
        "center_crop(32)");
  CHECK(SampleTransform::eval_spec_of("mixup") == "none");

  CHECK_THROWS_WITH(SampleTransform::parse("mixup(alpha=-1)", 0),
                    Contains("--augment 'mixup(alpha=-1)': mixup takes (alpha=A) with A > 0"));
  CHECK_THROWS_WITH(SampleTransform::parse("cutmix(0)", 0), Contains("cutmix takes (alpha=A)"));
  CHECK_THROWS_WITH(SampleTransform::parse("mixup(beta=1)", 0), Contains("mixup takes (alpha=A)"));
  CHECK_THROWS_WITH(SampleTransform::parse("mixup(1, 2)", 0), Contains("mixup takes (alpha=A)"));
  CHECK_THROWS_WITH(SampleTransform::parse("mixup, mixup(0.3)", 0),
                    Contains("mixup is given twice"));
  CHECK_THROWS_WITH(SampleTransform::parse("mixup, hflip", 0),
                    Contains("hflip comes after a batch step"));
  CHECK_THROWS_WITH(SampleTransform::parse("center_crop(8), mixup", 0, "--eval-transform"),
                    Contains("--eval-transform 'center_crop(8), mixup': mixup mixes the samples of "
                             "a training batch: it belongs in --augment"));
  CHECK_THROWS_WITH(SampleTransform::parse("mixpu", 0), Contains("did you mean 'mixup'"));
}

TEST_CASE("cutmix box: torchvision's half sides, clipped, lam from the clipped area",
          "[augment][cutmix]") {
  // lam 0.75: r = sqrt(0.25) / 2 = 0.25, half sides 8 of 32 and 4 of 16.
  CutmixBox b = cutmix_box(0.75, 8, 16, 16, 32);
  CHECK((b.y0 == 4 && b.y1 == 12 && b.x0 == 8 && b.x1 == 24));
  CHECK(b.lam == 1.0 - (8.0 * 16.0) / (16.0 * 32.0));
  // At a corner the box is clipped to a quarter of its area.
  b = cutmix_box(0.75, 0, 0, 16, 32);
  CHECK((b.y0 == 0 && b.y1 == 4 && b.x0 == 0 && b.x1 == 8));
  CHECK(b.lam == 1.0 - 32.0 / 512.0);
  b = cutmix_box(0.75, 15, 31, 16, 32);
  CHECK((b.y0 == 11 && b.y1 == 16 && b.x0 == 23 && b.x1 == 32));
  CHECK(b.lam == 1.0 - (5.0 * 9.0) / 512.0);
  // lam 1: an empty box, nothing pasted; lam 0 at the centre: the whole image.
  b = cutmix_box(1.0, 5, 7, 16, 32);
  CHECK((b.y1 == b.y0 && b.x1 == b.x0 && b.lam == 1.0));
  b = cutmix_box(0.0, 8, 16, 16, 32);
  CHECK((b.y0 == 0 && b.y1 == 16 && b.x0 == 0 && b.x1 == 32 && b.lam == 0.0));
  // Truncation as int(r * W): r * 5 = 1.25 -> 1.
  b = cutmix_box(0.75, 2, 2, 5, 5);
  CHECK((b.y0 == 1 && b.y1 == 3 && b.x0 == 1 && b.x1 == 3));
  CHECK(b.lam == 1.0 - 4.0 / 25.0);
}

TEST_CASE("the partner of each row is a permutation of the batch", "[augment][mixup]") {
  const BatchMixer m({0.4, 0}, 11, {6});
  for (std::size_t rows : {0, 1, 2, 3, 4, 5, 16, 17, 63, 100, 1000, 4097}) {
    std::size_t moved = 0;
    for (std::uint64_t step : {0, 1, 9}) {
      const BatchMixDraw d = m.draw(step, 0);
      std::vector<std::size_t> p(rows);
      for (std::size_t r = 0; r < rows; ++r) p[r] = BatchMixer::partner(d, r, rows);
      std::vector<std::size_t> sorted = p;
      std::sort(sorted.begin(), sorted.end());
      std::vector<std::size_t> iota(rows);
      std::iota(iota.begin(), iota.end(), std::size_t{0});
      CHECK(sorted == iota);
      for (std::size_t r = 0; r < rows; ++r) moved += p[r] != r;
    }
    if (rows >= 16) CHECK(moved > rows);  // not the identity, most rows paired elsewhere
  }
}

TEST_CASE("lam ~ Beta(alpha, alpha); with both steps each is chosen half the time",
          "[augment][mixup]") {
  for (double alpha : {0.2, 1.0, 4.0}) {
    const BatchMixer m({alpha, 0}, 5, {3});
    const int n = 20000;
    double sum = 0, sum_sq = 0;
    for (int s = 0; s < n; ++s) {
      const float lam = m.draw(static_cast<std::uint64_t>(s), 1).lam;
      REQUIRE((lam >= 0.0f && lam <= 1.0f));
      sum += lam;
      sum_sq += static_cast<double>(lam) * lam;
    }
    const double mean = sum / n, var = sum_sq / n - mean * mean;
    INFO("alpha " << alpha);
    CHECK(mean == Approx(0.5).margin(0.01));
    CHECK(var == Approx(1.0 / (4.0 * (2.0 * alpha + 1.0))).epsilon(0.05));
  }
  const BatchMixer both({0.3, 1.0}, 5, {3, 8, 8});
  int mixups = 0;
  for (std::uint64_t s = 0; s < 4000; ++s)
    mixups += both.draw(s, 0).kind == BatchMixDraw::Kind::mixup;
  CHECK(mixups == Approx(2000).margin(150));
}

TEST_CASE("a batch's mix is a pure function of (seed, step, rank)", "[augment][mixup]") {
  const std::vector<std::size_t> shape = {3, 6, 5};
  const std::size_t rows = 7, sample = 90;
  const auto x = batch(rows, sample);
  const std::vector<std::int32_t> y = {4, 0, 9, 2, 2, 7, 1};
  const BatchMixer a({0.2, 1.0}, 42, shape), same({0.2, 1.0}, 42, shape),
      other_seed({0.2, 1.0}, 43, shape);
  for (std::uint64_t step : {0, 1, 17}) {
    for (std::uint64_t rank : {0, 1, 3}) {
      const BatchMixDraw d = a.draw(step, rank), e = same.draw(step, rank);
      CHECK((d.kind == e.kind && d.lam == e.lam && d.key == e.key && d.y0 == e.y0 && d.x1 == e.x1));
      const Mixed m1 = mix(a, d, x, y), m2 = mix(same, e, x, y);
      CHECK(std::memcmp(m1.x.data(), m2.x.data(), m1.x.size() * sizeof(float)) == 0);
      CHECK(m1.second == m2.second);
    }
  }
  std::set<std::uint64_t> keys;
  for (std::uint64_t step = 0; step < 4; ++step)
    for (std::uint64_t rank = 0; rank < 4; ++rank) keys.insert(a.draw(step, rank).key);
  for (std::uint64_t step = 0; step < 4; ++step) keys.insert(other_seed.draw(step, 0).key);
  CHECK(keys.size() == 20);  // every step, rank and seed draws apart
}

TEST_CASE("mixup blends rows with their partners; cutmix pastes the partner's box",
          "[augment][mixup][cutmix]") {
  const std::vector<std::size_t> shape = {2, 8, 6};
  const std::size_t rows = 5, sample = 96;
  const auto x = batch(rows, sample);
  const std::vector<std::int32_t> y = {3, 1, 4, 1, 5};

  const BatchMixer mixup({0.4, 0}, 7, {sample});  // any float sample
  const BatchMixDraw d = mixup.draw(3, 2);
  CHECK(d.kind == BatchMixDraw::Kind::mixup);
  const Mixed m = mix(mixup, d, x, y);
  for (std::size_t r = 0; r < rows; ++r) {
    const std::size_t p = BatchMixer::partner(d, r, rows);
    CHECK(m.second[r] == y[p]);
    for (std::size_t e = 0; e < sample; ++e) {
      const float want = d.lam * x[r * sample + e] + (1.0f - d.lam) * x[p * sample + e];
      REQUIRE(m.x[r * sample + e] == want);
    }
  }

  const BatchMixer cutmix({0, 1.0}, 7, shape);
  bool some_box = false;
  for (std::uint64_t step = 0; step < 6; ++step) {
    const BatchMixDraw c = cutmix.draw(step, 0);
    CHECK(c.kind == BatchMixDraw::Kind::cutmix);
    const double area = static_cast<double>((c.y1 - c.y0) * (c.x1 - c.x0));
    CHECK(c.lam == static_cast<float>(1.0 - area / 48.0));
    some_box = some_box || area > 0;
    const Mixed k = mix(cutmix, c, x, y);
    for (std::size_t r = 0; r < rows; ++r) {
      const std::size_t p = BatchMixer::partner(c, r, rows);
      CHECK(k.second[r] == y[p]);
      for (std::size_t ch = 0; ch < 2; ++ch)
        for (std::size_t yy = 0; yy < 8; ++yy)
          for (std::size_t xx = 0; xx < 6; ++xx) {
            const std::size_t e = (ch * 8 + yy) * 6 + xx;
            const bool in = yy >= c.y0 && yy < c.y1 && xx >= c.x0 && xx < c.x1;
            REQUIRE(k.x[r * sample + e] == x[(in ? p : r) * sample + e]);
          }
    }
  }
  CHECK(some_box);
}

TEST_CASE("cutmix needs images; mixup takes any float sample", "[augment][cutmix]") {
  CHECK_THROWS_WITH(BatchMixer({0, 1.0}, 0, {20}, "--augment"),
                    Contains("--augment cutmix(alpha=1): cutmix cuts a box out of images, and the "
                             "samples here are [20], not [C, H, W]"));
  CHECK_THROWS_WITH(BatchMixer({0.2, 1.0}, 0, {4, 5}), Contains("cutmix cuts a box"));
  CHECK_NOTHROW(BatchMixer({0.2, 0}, 0, {20}));
  CHECK_NOTHROW(BatchMixer({0.2, 1.0}, 0, {1, 4, 5}));
}
