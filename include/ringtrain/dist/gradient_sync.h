// Averages gradients across ranks bucket by bucket. With overlap, a bucket's
// async all-reduce starts the moment backward has written its last gradient
// (on_layer_ready), while backward goes on with earlier layers; finish() waits
// for all of them before the optimizer runs. Without overlap, every bucket is
// launched by finish(), after backward, for comparison.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/buffer_view.h"
#include "ringtrain/dist/bucket_plan.h"

namespace ringtrain {

struct BucketTiming {
  std::size_t bucket = 0;
  double launched_s = 0;  // monotonic_seconds() when the all-reduce was issued
  double done_s = 0;      // when its completion was observed
};

class GradientSynchronizer {
 public:
  // before_launch runs before each bucket's all-reduce is issued. On a GPU the
  // trainer passes the model's stream synchronisation there: backward's
  // kernels for the bucket are only queued when on_layer_ready fires, and the
  // communicator's stream must not read the gradients before they ran.
  GradientSynchronizer(Communicator& comm, BucketPlan plan, BufferView grads, bool overlap,
                       std::function<void()> before_launch = {});

  // sync = false for the first micro-batches of --accum: gradients accumulate
  // locally and nothing is all-reduced until the last one.
  void begin_step(bool sync);
  // Called by Model::backward when layer's gradients are final.
  void on_layer_ready(std::size_t layer);
  // Waits for every bucket (launching those not yet launched). Afterwards the
  // gradient buffer holds the average over all ranks.
  void finish();

  // Seconds finish() spent waiting: the communication backward did not hide.
  double exposed_seconds() const { return exposed_s_; }
  const std::vector<BucketTiming>& timings() const { return timings_; }
  const BucketPlan& plan() const { return plan_; }
  bool overlap() const { return overlap_; }

 private:
  void launch(std::size_t bucket);

  Communicator& comm_;
  BucketPlan plan_;
  BufferView grads_;
  bool overlap_;
  std::function<void()> before_launch_;
  bool sync_ = true;
  std::vector<CommRequest> requests_;
  std::vector<bool> launched_;
  std::vector<BucketTiming> timings_;
  double exposed_s_ = 0;
};

}  // namespace ringtrain
