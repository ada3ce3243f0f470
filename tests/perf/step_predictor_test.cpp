#include <catch2/catch.hpp>

#include "ringtrain/perf/step_predictor.h"

using namespace ringtrain;

namespace {
// 3 buckets; inter-node link 100us latency, 100 MB/s. On 2 nodes x 1 rank a
// bucket of n bytes takes 2*(100us + n/2 * 10ns) = 200us + n * 10ns.
StepProfile three_buckets() {
  StepProfile p;
  p.before_backward_s = 3e-3;
  p.backward_s = 6e-3;
  p.optimizer_s = 1e-3;
  p.buckets = {{1e5, 1e-3}, {2e5, 2e-3}, {1e5, 5e-3}};
  return p;
}
LinkTiers slow_network() {
  LinkTiers m;
  m.intra = {10e-6, 1e-9};
  m.inter = {100e-6, 1e-8};
  return m;
}
// 2 buckets on a shared core: backward 10 ms of work, bucket 0 (4 MB) ready at
// 4 ms of it, bucket 1 (2 MB) at 10 ms; forward 3 ms, optimizer 1 ms.
StepProfile two_buckets() {
  StepProfile p;
  p.before_backward_s = 3e-3;
  p.backward_s = 10e-3;
  p.optimizer_s = 1e-3;
  p.buckets = {{4e6, 4e-3}, {2e6, 10e-3}};
  return p;
}
// No latency, 1 ns/B alone and 2 ns/B beside compute, and compute at half its
// rate while an all-reduce runs. A ring of 2 moves n bytes in n * beta.
LinkTiers halving_link() {
  LinkTiers m;
  m.inter.beta_s_per_byte = 1e-9;
  m.inter.has_under_load = true;
  m.inter.loaded_beta_s_per_byte = 2e-9;
  m.inter.compute_loss = 0.5;
  return m;
}
}  // namespace

TEST_CASE("step predictor: a hand-computed 3-bucket timeline") {
  // Bucket 0: ready 1ms, 1.2ms long -> [1, 2.2]. Bucket 1: ready 2ms, waits for
  // bucket 0, 2.2ms long -> [2.2, 4.4]. Bucket 2: ready 5ms -> [5, 6.2].
  // Backward ends at 6ms: 0.2ms exposed. Compute 3 + 6 + 1 = 10ms.
  const StepPrediction p =
      predict_step(three_buckets(), {2, 1}, AllreduceAlgorithm::ring, slow_network());
  CHECK(p.comm_s == Approx(4.6e-3));
  CHECK(p.exposed_s == Approx(0.2e-3));
  CHECK(p.compute_s == Approx(10e-3));
  CHECK(p.step_s == Approx(10.2e-3));
  CHECK(p.exposed_share() == Approx(0.2 / 10.2));

  // Half the compute (strong scaling, half the batch per rank): ready at 0.5,
  // 1, 2.5ms, backward ends at 3ms. [0.5, 1.7], [1.7, 3.9], [3.9, 5.1]: 2.1ms
  // exposed on 5ms of compute.
  const StepPrediction half =
      predict_step(three_buckets(), {2, 1}, AllreduceAlgorithm::ring, slow_network(), 0.5);
  CHECK(half.exposed_s == Approx(2.1e-3));
  CHECK(half.step_s == Approx(7.1e-3));

  // One rank: no communication, the step is the compute.
  const StepPrediction one =
      predict_step(three_buckets(), {1, 1}, AllreduceAlgorithm::ring, slow_network());
  CHECK(one.comm_s == 0);
  CHECK(one.step_s == Approx(10e-3));
}

TEST_CASE("step predictor: communication sharing the compute core hides less") {
  // The timeline above: 4.6ms of all-reduce, 0.2ms after backward, so 4.4ms
  // overlapped backward. With a cpu share of 0.5 backward loses 0.5 * 4.4 =
  // 2.2ms: step 10 + 0.2 + 2.2 = 12.4ms.
  const StepPrediction half =
      predict_step(three_buckets(), {2, 1}, AllreduceAlgorithm::ring, slow_network(), 1.0, 0.5);
  CHECK(half.exposed_s == Approx(0.2e-3));
  CHECK(half.contention_s == Approx(2.2e-3));
  CHECK(half.step_s == Approx(12.4e-3));
  // Share 1: no overlap at all, compute + every all-reduce = 10 + 4.6ms.
  const StepPrediction serial =
      predict_step(three_buckets(), {2, 1}, AllreduceAlgorithm::ring, slow_network(), 1.0, 1.0);
  CHECK(serial.step_s == Approx(14.6e-3));
  // Share 0 is the free overlap of the first case.
  CHECK(predict_step(three_buckets(), {2, 1}, AllreduceAlgorithm::ring, slow_network(), 1.0, 0.0)
            .step_s == Approx(10.2e-3));
  CHECK_THROWS(
      predict_step(three_buckets(), {2, 1}, AllreduceAlgorithm::ring, slow_network(), 1.0, 1.5));

  // Which tier's share applies.
  LinkTiers m = slow_network();
  m.intra.cpu_share = 0.1;
  m.inter.cpu_share = 0.3;
  CHECK(allreduce_cpu_share({1, 1}, AllreduceAlgorithm::ring, m) == 0);
  CHECK(allreduce_cpu_share({1, 4}, AllreduceAlgorithm::ring, m) == Approx(0.1));
  CHECK(allreduce_cpu_share({4, 1}, AllreduceAlgorithm::ring, m) == Approx(0.3));
  CHECK(allreduce_cpu_share({4, 2}, AllreduceAlgorithm::ring, m) == Approx(0.3));
  m.intra.cpu_share = 0.5;
  CHECK(allreduce_cpu_share({4, 2}, AllreduceAlgorithm::hierarchical, m) == Approx(0.5));
  CHECK(allreduce_cpu_share({4, 1}, AllreduceAlgorithm::hierarchical, m) == Approx(0.3));
}

TEST_CASE("step predictor: rebucketing interpolates ready times") {
  // Cap 1.5e5: the first cut is 0.5e5 into bucket 1 (a quarter of its 2e5,
  // produced between 1ms and 2ms -> 1.25ms); the second is bucket 1's end
  // (2ms); the rest, 1e5, is bucket 2 (5ms).
  const StepProfile r = rebucket(three_buckets(), 1.5e5);
  REQUIRE(r.buckets.size() == 3);
  CHECK(r.buckets[0].bytes == Approx(1.5e5));
  CHECK(r.buckets[0].ready_s == Approx(1.25e-3));
  CHECK(r.buckets[1].bytes == Approx(1.5e5));
  CHECK(r.buckets[1].ready_s == Approx(2e-3));
  CHECK(r.buckets[2].bytes == Approx(1e5));
  CHECK(r.buckets[2].ready_s == Approx(5e-3));
  CHECK(r.total_bytes() == Approx(4e5));
  CHECK(r.backward_s == 6e-3);

  const StepProfile one = rebucket(three_buckets(), 0);
  REQUIRE(one.buckets.size() == 1);
  CHECK(one.buckets[0].bytes == Approx(4e5));
  CHECK(one.buckets[0].ready_s == Approx(5e-3));
}

TEST_CASE("step predictor on a shared core: a hand-computed timeline with both sides slowed") {
  // 2 nodes x 1 rank, no latency, 1 ns/B alone and 2 ns/B beside compute, and
  // compute at half its rate while an all-reduce runs. A ring of 2 moves n
  // bytes in n * beta: bucket 0 (4 MB) 4 ms alone, 8 ms loaded; bucket 1 (2 MB)
  // 2 ms alone, 4 ms loaded. Backward is 10 ms of work; bucket 0 is ready at 4
  // ms of it, bucket 1 at 10 ms.
  const StepProfile prof = two_buckets();
  const LinkTiers m = halving_link();
  // [0, 4] backward alone. [4, 12] bucket 0 loaded, backward at half rate
  // (8 -> done 8 ms of work). [12, 14] backward alone to 10. [14, 16] bucket 1
  // alone. Backward ends at 14 (4 ms late), 2 ms exposed.
  const StepPrediction p = predict_step_shared_core(prof, {2, 1}, AllreduceAlgorithm::ring, m);
  CHECK(p.comm_s == Approx(6e-3));
  CHECK(p.contention_s == Approx(4e-3));
  CHECK(p.exposed_s == Approx(2e-3));
  CHECK(p.compute_s == Approx(14e-3));
  CHECK(p.step_s == Approx(20e-3));

  // Nothing slowed under load: the timeline of predict_step without contention.
  LinkTiers same = slow_network();
  for (LinkParams* l : {&same.intra, &same.inter}) {
    l->has_under_load = true;
    l->loaded_alpha_s = l->alpha_s;
    l->loaded_beta_s_per_byte = l->beta_s_per_byte;
  }
  for (double scale : {1.0, 0.5}) {
    const StepPrediction a =
        predict_step(three_buckets(), {2, 1}, AllreduceAlgorithm::ring, same, scale);
    const StepPrediction b =
        predict_step_shared_core(three_buckets(), {2, 1}, AllreduceAlgorithm::ring, same, scale);
    CHECK(b.step_s == Approx(a.step_s));
    CHECK(b.exposed_s == Approx(a.exposed_s));
    CHECK(b.contention_s == Approx(0).margin(1e-12));
  }
  // One rank: nothing to all-reduce, compute alone.
  const StepPrediction one = predict_step_shared_core(prof, {1, 1}, AllreduceAlgorithm::ring, m);
  CHECK(one.step_s == Approx(14e-3));
  // A tier the shape uses with no under-load fit is an error naming the remedy.
  CHECK_THROWS_WITH(
      predict_step_shared_core(prof, {2, 1}, AllreduceAlgorithm::ring, slow_network()),
      Catch::Contains("bench model --under-load"));
}

TEST_CASE("step predictor: the wait for the last rank adds to the exposed time once") {
  // Ranks that share cores reach the step's last all-reduce apart; the
  // measured wait (bench model --after-compute) is exposed, once per step,
  // whatever the buckets, in both timelines. One rank waits for nobody.
  LinkTiers m = slow_network();
  for (LinkParams* l : {&m.intra, &m.inter}) {
    l->has_under_load = true;
    l->loaded_alpha_s = l->alpha_s;
    l->loaded_beta_s_per_byte = l->beta_s_per_byte;
  }
  LinkTiers waiting = m;
  waiting.inter.arrival_wait_s = 2.5e-3;
  waiting.intra.arrival_wait_s = 0.5e-3;
  using Timeline = StepPrediction (*)(const StepProfile&, const ClusterShape&, AllreduceAlgorithm,
                                      const LinkTiers&, double);
  const Timeline free_overlap = [](const StepProfile& p, const ClusterShape& s,
                                   AllreduceAlgorithm a, const LinkTiers& c,
                                   double scale) { return predict_step(p, s, a, c, scale); };
  for (const Timeline timeline : {free_overlap, &predict_step_shared_core}) {
    for (double scale : {1.0, 0.5}) {
      const StepPrediction a =
          timeline(three_buckets(), {2, 1}, AllreduceAlgorithm::ring, m, scale);
      const StepPrediction b =
          timeline(three_buckets(), {2, 1}, AllreduceAlgorithm::ring, waiting, scale);
      CHECK(b.exposed_s == Approx(a.exposed_s + 2.5e-3));
      CHECK(b.step_s == Approx(a.step_s + 2.5e-3));
      CHECK(b.comm_s == Approx(a.comm_s));
      CHECK(b.contention_s == Approx(a.contention_s));
    }
  }
  // The tiers a shape uses: one node is intra, a flat ring across nodes is
  // inter, a hierarchical one with several ranks per node the larger of both.
  CHECK(allreduce_arrival_wait({1, 4}, AllreduceAlgorithm::ring, waiting) == Approx(0.5e-3));
  CHECK(allreduce_arrival_wait({2, 2}, AllreduceAlgorithm::ring, waiting) == Approx(2.5e-3));
  waiting.intra.arrival_wait_s = 4e-3;
  CHECK(allreduce_arrival_wait({2, 2}, AllreduceAlgorithm::hierarchical, waiting) == Approx(4e-3));
  CHECK(allreduce_arrival_wait({1, 1}, AllreduceAlgorithm::ring, waiting) == 0);
  const StepPrediction one =
      predict_step(three_buckets(), {1, 1}, AllreduceAlgorithm::ring, waiting);
  CHECK(one.exposed_s == 0);
}

TEST_CASE("step predictor: the last rank's lag delays every bucket's all-reduce") {
  // Ranks that share cores stay apart all step: the last reaches each bucket
  // `lag` after the ranks' mean, and the all-reduce starts only then. The
  // lag takes the place of the wait (which is not added on top).
  LinkTiers lagging = slow_network();
  lagging.inter.arrival_lag_s = 1e-3;
  lagging.inter.arrival_wait_s = 2.5e-3;
  // The 3-bucket timeline with each ready time 1 ms later: bucket 0 [2, 3.2],
  // bucket 1 ready at 3, after bucket 0 [3.2, 5.4], bucket 2 ready at 6 [6,
  // 7.2]. Backward ends at 6: 1.2 ms exposed, step 11.2 ms.
  const StepPrediction p = predict_step(three_buckets(), {2, 1}, AllreduceAlgorithm::ring, lagging);
  CHECK(p.comm_s == Approx(4.6e-3));
  CHECK(p.exposed_s == Approx(1.2e-3));
  CHECK(p.step_s == Approx(11.2e-3));

  // On a shared core (the timeline of the hand-computed case above, 1 ms lag):
  // [0, 5] backward alone (bucket 0 ready at 4, the last rank there at 5).
  // [5, 13] bucket 0 loaded, backward at half rate (5 -> 9 ms of work).
  // [13, 14] backward alone to 10; bucket 1 ready at 14, started at 15.
  // [15, 17] bucket 1 alone. Backward ends at 14 (4 ms late), 3 ms exposed.
  const StepProfile prof = two_buckets();
  LinkTiers m = halving_link();
  m.inter.arrival_lag_s = 1e-3;
  m.inter.arrival_wait_s = 5e-3;
  const StepPrediction s = predict_step_shared_core(prof, {2, 1}, AllreduceAlgorithm::ring, m);
  CHECK(s.comm_s == Approx(6e-3));
  CHECK(s.contention_s == Approx(4e-3));
  CHECK(s.exposed_s == Approx(3e-3));
  CHECK(s.step_s == Approx(21e-3));
  // An all-reduce proceeds beside compute until the last rank's backward ends
  // too (lag after the mean rank's): a ring needs every rank. Bucket 0 ready at
  // 9 ms of backward work, lag 2 ms: [0, 10] backward alone (the mean rank's
  // ends at 10, the last rank's at 12); bucket 0 starts at 11, [11, 12]
  // loaded (1/8 of its 8 ms), [12, 15.5] alone (7/8 of 4 ms); bucket 1 (ready
  // at 10, the last rank there at 12) [15.5, 17.5]. 7.5 ms exposed (7 ms if
  // bucket 0 ran alone from 11).
  StepProfile late = prof;
  late.buckets[0].ready_s = 9e-3;
  LinkTiers far = halving_link();
  far.inter.arrival_lag_s = 2e-3;
  const StepPrediction f = predict_step_shared_core(late, {2, 1}, AllreduceAlgorithm::ring, far);
  CHECK(f.contention_s == Approx(0).margin(1e-12));
  CHECK(f.exposed_s == Approx(7.5e-3));
  CHECK(f.step_s == Approx(21.5e-3));
  // The tiers a shape uses, as for the wait; one rank lags nobody.
  lagging.intra.arrival_lag_s = 0.5e-3;
  CHECK(allreduce_arrival_lag({1, 4}, AllreduceAlgorithm::ring, lagging) == Approx(0.5e-3));
  CHECK(allreduce_arrival_lag({2, 2}, AllreduceAlgorithm::ring, lagging) == Approx(1e-3));
  lagging.intra.arrival_lag_s = 3e-3;
  CHECK(allreduce_arrival_lag({2, 2}, AllreduceAlgorithm::hierarchical, lagging) == Approx(3e-3));
  CHECK(predict_step(three_buckets(), {1, 1}, AllreduceAlgorithm::ring, lagging).exposed_s == 0);
}
