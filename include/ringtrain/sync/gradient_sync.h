// Averages gradients across ranks bucket by bucket. With overlap, a bucket's
// async all-reduce starts the moment backward has written its last gradient
// (on_layer_ready), while backward goes on with earlier layers; finish() waits
// for all of them before the optimizer runs. Without overlap, every bucket is
// launched by finish(), after backward, for comparison.
//
// On a GPU nothing here blocks the host: backward's kernels are only queued
// when on_layer_ready fires, so each launch records an ordering point on the
// compute stream and the communicator starts the bucket after it; finish()
// makes the compute stream (where the optimizer runs next) wait for each
// bucket's completion point. A backend whose requests have no device point
// (the CPU backends) is waited for on the host instead.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/buffer_view.h"
#include "ringtrain/sync/bucket_plan.h"
#include "ringtrain/sync/zero_layout.h"

namespace ringtrain {

struct BucketTiming {
  std::size_t bucket = 0;
  double launched_s = 0;  // monotonic_seconds() when the all-reduce was issued
  double done_s = 0;      // when its completion was observed (on a GPU: when the
                          // optimizer was ordered after it; the device time is later)
  // When the backend ran it (CPU backends: after the buckets before it, and
  // often long before done_s, which waits for backward); -1 where unknown.
  double began_s = -1;
  double finished_s = -1;
};

// When backward finished a bucket's gradients (on one rank too, where nothing
// is exchanged): what the step predictor (perf/step_predictor.h) needs to know when a
// bucket's all-reduce could start.
struct BucketReady {
  std::size_t bucket = 0;
  double ready_s = 0;  // monotonic_seconds()
};

class GradientSynchronizer {
 public:
  // compute_stream: where backward queues the gradient kernels and the
  // optimizer runs (cudaStream_t as void*; nullptr on the CPU). op: avg when
  // each rank's gradient is of its own mean loss (--batch), sum when each
  // rank's loss is already divided by the global batch (--global-batch).
  GradientSynchronizer(Communicator& comm, BucketPlan plan, BufferView grads, bool overlap,
                       void* compute_stream = nullptr, ReduceOp op = ReduceOp::avg);

  // sync = false for the first micro-batches of --accum: gradients accumulate
  // locally and nothing is all-reduced until the last one.
  void begin_step(bool sync);
  // Called by Model::backward when layer's gradients are final.
  void on_layer_ready(std::size_t layer);
  // Launches the buckets not yet launched and orders the compute stream after
  // every bucket (CPU backends: waits for them). Work queued on the compute
  // stream afterwards sees the average over all ranks.
  void finish();

  // Seconds finish() spent waiting: the communication backward did not hide.
  double exposed_seconds() const { return exposed_s_; }
  const std::vector<BucketTiming>& timings() const { return timings_; }
  // First bucket launched to last bucket done, in the last step that
  // synchronised (0 when no bucket was launched).
  double comm_span_seconds() const;
  // This step's buckets in the order backward completed them (with or without
  // overlap, any number of ranks); empty on micro-batches that do not sync.
  const std::vector<BucketReady>& ready() const { return ready_; }
  const BucketPlan& plan() const { return plan_; }

  // Called with each slice of this rank's own gradients (and its offset in
  // the buffer) just before the all-reduce mixes it with the others', or with
  // the whole buffer on one rank, on the steps that synchronise: the
  // --nonfinite guard checks it there (on a GPU by kernels queued on the
  // compute stream, which the all-reduce is ordered after), so a non-finite
  // average can be traced to the ranks that produced it.
  using LocalCheck = std::function<void(BufferView slice, std::size_t offset)>;
  void set_local_check(LocalCheck check) { local_check_ = std::move(check); }
  // Whether the average is this rank's own gradient buffer, which the local
  // check has seen whole on the step's last micro-batch (one rank, no ZeRO).
  bool average_is_local() const { return comm_.size() == 1 && zero_ == nullptr; }
  bool overlap() const { return overlap_; }

  // --grad-dtype and --zero 1 (gradient_wire.h, zero_layout.h). Collective
  // (it allocates the communicator's buffers): every rank calls it once, in
  // the same order, before the first step. wire: the dtype buckets travel in.
  // zero: null to all-reduce every bucket into the gradient buffer; else
  // each bucket is reduce-scattered, and this rank's reduced blocks land in
  // shard_gradients() (f32, the layout's shard_count() elements, the padding
  // zero), not in the gradient buffer.
  void configure(DType wire, const ZeroLayout* zero);
  DType wire_dtype() const { return wire_; }
  BufferView shard_gradients() const { return shard_grads_; }
  // Bytes this rank handed to the gradient collectives in the last step that
  // synchronised (in the wire dtype; ZeRO: the padded reduce-scatter inputs);
  // 0 on one rank.
  std::size_t wire_bytes() const { return wire_bytes_; }

 private:
  void launch(std::size_t bucket);
  void launch_zero(std::size_t bucket);
  // After bucket b's collective: widens a 16-bit result into f32.
  void land(std::size_t bucket);

  Communicator& comm_;
  BucketPlan plan_;
  BufferView grads_;
  bool overlap_;
  ReduceOp op_ = ReduceOp::avg;
  void* compute_stream_;
  bool sync_ = true;
  std::vector<CommRequest> requests_;
  std::vector<bool> launched_;
  std::vector<BucketTiming> timings_;
  std::vector<BucketReady> ready_;
  double exposed_s_ = 0;
  LocalCheck local_check_;
  DType wire_ = DType::f32;
  const ZeroLayout* zero_ = nullptr;
  BufferView wire_buf_;     // 16-bit all-reduce: the buckets in the wire dtype
  BufferView staging_;      // ZeRO: padded reduce-scatter inputs (wire dtype)
  BufferView shard_out_;    // ZeRO: reduce-scatter outputs (wire dtype)
  BufferView shard_grads_;  // ZeRO: the reduced shard in f32 (== shard_out_ in f32)
  std::size_t wire_bytes_ = 0;
};

}  // namespace ringtrain
