#include <catch2/catch.hpp>

#include <cmath>

#include "ringtrain/core/error.h"
#include "ringtrain/sync/comm_model.h"

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

TEST_CASE("all-reduce time: ring and hierarchical formulas") {
  CommModel m;
  m.intra = {10e-6, 1e-9};
  m.inter = {100e-6, 1e-8};
  const double n = 1e5;
  // One rank: nothing to do.
  CHECK(allreduce_seconds(n, {1, 1}, AllreduceAlgorithm::ring, m) == 0);
  // One node, 4 ranks: intra link, 2*3*(10us + 25000*1ns) = 210us.
  CHECK(allreduce_seconds(n, {1, 4}, AllreduceAlgorithm::ring, m) == Approx(210e-6));
  // 2 nodes x 2 ranks, flat ring: every step waits on the inter link,
  // 2*3*(100us + 25000*10ns) = 2100us.
  CHECK(allreduce_seconds(n, {2, 2}, AllreduceAlgorithm::ring, m) == Approx(2100e-6));
  // Hierarchical: 2*(10us + 50000*1ns) + 2*(100us + 25000*10ns) = 120us + 700us.
  CHECK(allreduce_seconds(n, {2, 2}, AllreduceAlgorithm::hierarchical, m) == Approx(820e-6));
  CHECK(parse_allreduce_algorithm("hierarchical") == AllreduceAlgorithm::hierarchical);
  CHECK_THROWS_AS(parse_allreduce_algorithm("tree"), Error);
}

TEST_CASE("bucket suggestion: latency within 5% of the transfer time") {
  CommModel m;
  m.inter = {100e-6, 1e-8};
  // 2 nodes x 1 rank: latency 2*100us, transfer n*1e-8 s: n >= 200us / (0.05 * 1e-8).
  const double b = suggest_bucket_bytes({2, 1}, AllreduceAlgorithm::ring, m);
  CHECK(b == Approx(4e5));
  const double latency = allreduce_seconds(0, {2, 1}, AllreduceAlgorithm::ring, m);
  CHECK(latency ==
        Approx(0.05 * (allreduce_seconds(b, {2, 1}, AllreduceAlgorithm::ring, m) - latency)));
  CHECK(suggest_bucket_bytes({1, 1}, AllreduceAlgorithm::ring, m) == 0);
}
