#include "ringtrain/sync/gradient_sync.h"

#include "ringtrain/comm/flight_recorder.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/timer.h"

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
}

void GradientSynchronizer::launch(std::size_t b) {
  const Bucket& bucket = plan_.buckets()[b];
  BufferView slice = grads_.slice(bucket.offset, bucket.count);
  // Before the all-reduce overwrites it with the average (queued on the
  // compute stream, so the all-reduce starts after it).
  if (local_check_) local_check_(slice, bucket.offset);
  // The average or sum over ranks (each backend's arithmetic: communicator.h). The
  // bucket's all-reduce starts after the gradient kernels queued so far.
  comm_.order_after(OrderingPoint::record(grads_.device, compute_stream_));
  timings_.push_back({b, monotonic_seconds(), 0});
  flight::set_bucket(static_cast<std::int64_t>(b));
  requests_[b] = comm_.allreduce_async(slice, slice, op_);
  flight::set_bucket(-1);
  launched_[b] = true;
}

void GradientSynchronizer::on_layer_ready(std::size_t layer) {
  if (!sync_) return;
  const int b = plan_.bucket_completed_by(layer);
  if (b < 0) return;
  ready_.push_back({static_cast<std::size_t>(b), monotonic_seconds()});
  if (overlap_ && comm_.size() > 1) launch(static_cast<std::size_t>(b));
}

void GradientSynchronizer::finish() {
  // One rank: the average (or sum) is the gradient itself; nothing to exchange.
  if (!sync_ || comm_.size() == 1) {
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
    t.done_s = monotonic_seconds();
    const CommRequest::RunTimes ran = request.run_times();
    t.began_s = ran.began_s;
    t.finished_s = ran.finished_s;
  }
  exposed_s_ = monotonic_seconds() - start;
}

}  // namespace ringtrain
