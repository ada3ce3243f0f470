#include "ringtrain/sync/gradient_sync.h"

#include <algorithm>

#include "ringtrain/comm/flight_recorder.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/sync/gradient_wire.h"

namespace ringtrain {

GradientSynchronizer::GradientSynchronizer(Communicator& comm, BucketPlan plan, BufferView grads,
                                           bool overlap, void* compute_stream, ReduceOp op)
    : comm_(comm),
      plan_(std::move(plan)),
      grads_(grads),
      overlap_(overlap),
      op_(op),
      compute_stream_(compute_stream) {
  RT_CHECK(grads_.count == plan_.total_count(),
           "gradient buffer holds {} elements but the bucket plan covers {}", grads_.count,
           plan_.total_count());
  requests_.resize(plan_.buckets().size());
  launched_.assign(plan_.buckets().size(), false);
}

void GradientSynchronizer::begin_step(bool sync) {
  sync_ = sync;
  std::fill(launched_.begin(), launched_.end(), false);
  ready_.clear();
  timings_.clear();
  exposed_s_ = 0;
  if (sync) wire_bytes_ = 0;
}

void GradientSynchronizer::configure(DType wire, const ZeroLayout* zero) {
  RT_CHECK(wire == DType::f32 || wire == DType::bf16 || wire == DType::f16,
           "--grad-dtype: {} is not a gradient wire dtype", dtype_name(wire));
  wire_ = wire;
  zero_ = zero;
  if (zero_ != nullptr) {
    RT_CHECK(zero_->param_count() == grads_.count && zero_->blocks().size() == requests_.size(),
             "internal: the ZeRO layout covers {} elements in {} buckets, the gradients {} in {}",
             zero_->param_count(), zero_->blocks().size(), grads_.count, requests_.size());
    // Zeroed once: padding that is never written must add nothing.
    staging_ = comm_.allocate(zero_->padded_count(), wire_);
    zero_on_stream(staging_, nullptr);
    shard_out_ = comm_.allocate(zero_->shard_count(), wire_);
    zero_on_stream(shard_out_, nullptr);
    if (wire_ == DType::f32) {
      shard_grads_ = shard_out_;
    } else {
      shard_grads_ = comm_.allocate(zero_->shard_count(), DType::f32);
      zero_on_stream(shard_grads_, nullptr);
    }
  } else if (wire_ != DType::f32) {
    wire_buf_ = comm_.allocate(grads_.count, wire_);
  }
}

void GradientSynchronizer::launch(std::size_t b) {
  const Bucket& bucket = plan_.buckets()[b];
  BufferView slice = grads_.slice(bucket.offset, bucket.count);
  // Before the all-reduce overwrites it with the average (queued on the
  // compute stream, so the all-reduce starts after it).
  if (local_check_) local_check_(slice, bucket.offset);
  if (zero_ != nullptr) return launch_zero(b);
  // The average or sum over ranks (each backend's arithmetic: communicator.h);
  // in 16 bits, a sum of the scaled copy (gradient_wire.h).
  const WireReduction reduction = wire_reduction(wire_, op_, comm_.size());
  BufferView on_wire = slice;
  if (wire_ != DType::f32) {
    on_wire = wire_buf_.slice(bucket.offset, bucket.count);
    narrow_to_wire(on_wire, slice, reduction.scale, compute_stream_);
  }
  // The bucket's all-reduce starts after the gradient kernels queued so far.
  comm_.order_after(OrderingPoint::record(grads_.device, compute_stream_));
  timings_.push_back({b, monotonic_seconds(), 0});
  flight::set_bucket(static_cast<std::int64_t>(b));
  requests_[b] = comm_.allreduce_async(on_wire, on_wire, reduction.op);
  flight::set_bucket(-1);
  wire_bytes_ += on_wire.bytes();
  launched_[b] = true;
}

void GradientSynchronizer::launch_zero(std::size_t b) {
  const ZeroBlock& z = zero_->blocks()[b];
  const BufferView bucket = grads_.slice(z.bucket_offset, z.bucket_count);
  const auto world = static_cast<std::size_t>(comm_.size());
  if (world == 1) {
    // The whole bucket is this rank's block: nothing to exchange, and nothing
    // narrowed either (as without ZeRO on one rank).
    copy_on_stream(shard_grads_.slice(z.shard_offset, z.bucket_count), bucket, compute_stream_);
    launched_[b] = true;
    return;
  }
  // The bucket into its padded staging region (narrowed and scaled in 16
  // bits); the padding stays zero from configure().
  const BufferView in = staging_.slice(z.staging_offset, world * z.block);
  const WireReduction reduction = wire_reduction(wire_, op_, comm_.size());
  if (wire_ == DType::f32)
    copy_on_stream(in.slice(0, z.bucket_count), bucket, compute_stream_);
  else
    narrow_to_wire(in.slice(0, z.bucket_count), bucket, reduction.scale, compute_stream_);
  comm_.order_after(OrderingPoint::record(grads_.device, compute_stream_));
  timings_.push_back({b, monotonic_seconds(), 0});
  flight::set_bucket(static_cast<std::int64_t>(b));
  requests_[b] =
      comm_.reduce_scatter_async(in, shard_out_.slice(z.shard_offset, z.block), reduction.op);
  flight::set_bucket(-1);
  wire_bytes_ += in.bytes();
  launched_[b] = true;
}

void GradientSynchronizer::land(std::size_t b) {
  if (wire_ == DType::f32) return;
  if (zero_ != nullptr) {
    const ZeroBlock& z = zero_->blocks()[b];
    widen_from_wire(shard_grads_.slice(z.shard_offset, z.block),
                    shard_out_.slice(z.shard_offset, z.block), compute_stream_);
  } else {
    const Bucket& bucket = plan_.buckets()[b];
    widen_from_wire(grads_.slice(bucket.offset, bucket.count),
                    wire_buf_.slice(bucket.offset, bucket.count), compute_stream_);
  }
}

void GradientSynchronizer::on_layer_ready(std::size_t layer) {
  if (!sync_) return;
  const int b = plan_.bucket_completed_by(layer);
  if (b < 0) return;
  ready_.push_back({static_cast<std::size_t>(b), monotonic_seconds()});
  if (overlap_ && (comm_.size() > 1 || zero_ != nullptr)) launch(static_cast<std::size_t>(b));
}

void GradientSynchronizer::finish() {
  // One rank: the average (or sum) is the gradient itself; nothing to exchange.
  // (ZeRO on one rank still moves each bucket into the shard.)
  if (!sync_ || (comm_.size() == 1 && zero_ == nullptr)) {
    if (sync_ && local_check_) local_check_(grads_, 0);
    return;
  }
  const double start = monotonic_seconds();
  // Buckets are issued in plan order on every rank (backward order), so the
  // collectives match across ranks without negotiation.
  for (std::size_t b = 0; b < launched_.size(); ++b)
    if (!launched_[b]) launch(b);
  for (auto& t : timings_) {
    CommRequest& request = requests_[t.bucket];
    const OrderingPoint done = request.completion();
    if (done.empty())
      request.wait();
    else
      done.order_stream(compute_stream_);
    land(t.bucket);
    t.done_s = monotonic_seconds();
    const CommRequest::RunTimes ran = request.run_times();
    t.began_s = ran.began_s;
    t.finished_s = ran.finished_s;
  }
  exposed_s_ = monotonic_seconds() - start;
}

double GradientSynchronizer::comm_span_seconds() const {
  if (timings_.empty()) return 0;
  double first = timings_.front().launched_s, last_done = 0;
  for (const BucketTiming& b : timings_) {
    first = std::min(first, b.launched_s);
    last_done = std::max(last_done, b.done_s);
  }
  return last_done - first;
}

}  // namespace ringtrain
