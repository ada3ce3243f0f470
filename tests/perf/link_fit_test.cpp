#include <catch2/catch.hpp>

#include <cmath>

#include "ringtrain/core/error.h"
#include "ringtrain/perf/allreduce_time.h"

using namespace ringtrain;

namespace {
// Ring all-reduce times of a known link at sizes 1 KiB .. 64 MiB.
std::vector<TimingSample> ring_samples(double alpha, double beta, int ranks, double wobble = 0) {
  std::vector<TimingSample> out;
  int i = 0;
  for (double n = 1024; n <= 64.0 * 1024 * 1024; n *= 4, ++i) {
    const double t = 2.0 * (ranks - 1) * (alpha + n / ranks * beta);
    // A deterministic +-wobble, alternating, as measurement noise.
    out.push_back({n, t * (1 + ((i % 2) != 0 ? wobble : -wobble))});
  }
  return out;
}
}  // namespace

TEST_CASE("the fit recovers alpha and beta from exact ring timings") {
  for (int ranks : {2, 3, 4, 8}) {
    const double alpha = 7e-6, beta = 1.0 / 2.5e9;
    const LinkFit fit = fit_ring_allreduce(ring_samples(alpha, beta, ranks), ranks, 0.05);
    CHECK(fit.link.alpha_s == Approx(alpha).epsilon(1e-9));
    CHECK(fit.link.beta_s_per_byte == Approx(beta).epsilon(1e-9));
    CHECK(fit.intercept_s == Approx(2.0 * (ranks - 1) * alpha).epsilon(1e-9));
    CHECK(fit.max_abs_residual < 1e-9);
    CHECK(fit.residuals.size() == 9);
    CHECK_FALSE(fit.poor);
  }
}

TEST_CASE("the fit stays close under small noise and flags a poor one") {
  const double alpha = 50e-6, beta = 1.0 / 1.25e8;  // 1 Gbit/s
  const LinkFit noisy = fit_ring_allreduce(ring_samples(alpha, beta, 2, 0.02), 2, 0.10);
  CHECK(noisy.link.alpha_s == Approx(alpha).epsilon(0.05));
  CHECK(noisy.link.beta_s_per_byte == Approx(beta).epsilon(0.05));
  CHECK(noisy.max_abs_residual < 0.05);
  CHECK_FALSE(noisy.poor);

  std::vector<TimingSample> outlier = ring_samples(alpha, beta, 2);
  outlier[4].seconds *= 3;  // one size three times too slow
  const LinkFit poor = fit_ring_allreduce(outlier, 2, 0.10);
  CHECK(poor.poor);
  CHECK(poor.max_abs_residual > 0.10);
}

TEST_CASE("the fit rejects what cannot determine a line") {
  CHECK_THROWS_AS(fit_ring_allreduce({{1024, 1e-3}, {1024, 2e-3}}, 2, 0.1), Error);
  CHECK_THROWS_AS(fit_ring_allreduce({{1024, 1e-3}, {2048, 0}}, 2, 0.1), Error);
  CHECK_THROWS_AS(fit_ring_allreduce({{1024, 1e-3}, {2048, 2e-3}}, 1, 0.1), Error);
}

TEST_CASE("step curve: measured sizes price the ring steps between them") {
  // 2 ranks: a step moves n/2 bytes and an all-reduce is 2 steps. The 20 KB
  // size is fast (a token bucket's burst), the large ones on a line of their
  // own; the fit's beta is 8 ns/B.
  const std::vector<TimingSample> samples = {{2e6, 17e-3}, {20e3, 100e-6}, {1e6, 8e-3}};
  const std::vector<TimingSample> curve = ring_step_curve(samples, 2);
  REQUIRE(curve.size() == 3);
  CHECK(curve[0].bytes == Approx(10e3));
  CHECK(curve[0].seconds == Approx(50e-6));
  CHECK(curve[2].bytes == Approx(1e6));
  CHECK(curve[2].seconds == Approx(8.5e-3));
  LinkTiers m;
  m.inter = {5e-6, 8e-9};
  m.inter.step_curve = curve;
  auto ring = [&](double n, int nodes) {
    return allreduce_seconds(n, {nodes, 1}, AllreduceAlgorithm::ring, m);
  };
  // Between 1 and 2 MB: halfway from 4 ms to 8.5 ms per step.
  CHECK(ring(1.5e6, 2) == Approx(2 * 6.25e-3));
  // A measured size is its measured time.
  CHECK(ring(1e6, 2) == Approx(8e-3));
  // Beyond the largest: its step plus 8 ns/B for the 1 MB more per step.
  CHECK(ring(4e6, 2) == Approx(2 * (8.5e-3 + 1e6 * 8e-9)));
  // Below the smallest: its step less 8 ns/B, never under alpha.
  CHECK(ring(10e3, 2) == Approx(2 * (50e-6 - 5e3 * 8e-9)));
  CHECK(ring(0, 2) == Approx(2 * 5e-6));
  // 4 nodes from the same steps: 6 steps of 750 KB.
  CHECK(ring(3e6, 4) == Approx(6 * 6.25e-3));
  // The fit alone, as before.
  m.inter.step_curve.clear();
  CHECK(ring(1.5e6, 2) == Approx(2 * (5e-6 + 7.5e5 * 8e-9)));
}

TEST_CASE("step curve: timings on the fit's own line price as the fit") {
  const double alpha = 40e-6, beta = 1e-9;
  for (int ranks : {2, 3}) {
    const std::vector<TimingSample> samples = ring_samples(alpha, beta, ranks);
    LinkTiers m;
    m.inter = {alpha, beta};
    LinkTiers measured = m;
    measured.inter.step_curve = ring_step_curve(samples, ranks);
    for (double n : {0.0, 100.0, 5e3, 3e5, 7.7e6, 1e9})
      for (int nodes : {2, 3, 8})
        CHECK(allreduce_seconds(n, {nodes, 1}, AllreduceAlgorithm::ring, measured) ==
              Approx(allreduce_seconds(n, {nodes, 1}, AllreduceAlgorithm::ring, m)));
  }
}

TEST_CASE("step curve: a size measured twice counts at its mean; bad samples are refused") {
  const std::vector<TimingSample> curve =
      ring_step_curve({{1000, 1e-3}, {2000, 4e-3}, {1000, 3e-3}}, 2);
  REQUIRE(curve.size() == 2);
  CHECK(curve[0].bytes == Approx(500));
  CHECK(curve[0].seconds == Approx(1e-3));  // (1 + 3) / 2 ms over 2 steps
  CHECK(curve[1].seconds == Approx(2e-3));
  CHECK_THROWS_AS(ring_step_curve({{1000, 1e-3}}, 1), Error);
  CHECK_THROWS_AS(ring_step_curve({{1000, -1e-3}}, 2), Error);
  CHECK_THROWS_AS(ring_step_curve({{NAN, 1e-3}}, 2), Error);
}

TEST_CASE("step curve: beside compute the loaded curve prices; the bucket cap uses the fits") {
  LinkTiers m;
  m.inter = {100e-6, 1e-8};
  m.inter.has_under_load = true;
  m.inter.loaded_alpha_s = 200e-6;
  m.inter.loaded_beta_s_per_byte = 2e-8;
  m.inter.step_curve = {{1e3, 1e-3}, {1e6, 2e-3}};
  m.inter.loaded_step_curve = {{1e3, 3e-3}, {1e6, 5e-3}};
  const UnderLoadLinks u = under_load_links({2, 1}, AllreduceAlgorithm::ring, m);
  REQUIRE(u.complete);
  // 2 MB over 2 ranks: steps of the measured 1 MB chunk.
  CHECK(allreduce_seconds(2e6, {2, 1}, AllreduceAlgorithm::ring, u.tiers) == Approx(2 * 5e-3));
  CHECK(allreduce_seconds(2e6, {2, 1}, AllreduceAlgorithm::ring, m) == Approx(2 * 2e-3));
  // The cap suggestion of the fit alone: 2 x 100 us of latency against 1e-8 s/B.
  CHECK(suggest_bucket_bytes({2, 1}, AllreduceAlgorithm::ring, m) == Approx(4e5));
}
