// ParamGradientSync: a program's tensors mapped onto the trainer's bucket plan
// and synchroniser (param_gradient_sync.h). Registered tensor k (backward
// order) is "layer" n-1-k of the plan, whose layers are in forward order.
#include "ringtrain/sync/param_gradient_sync.h"

#include "ringtrain/core/check.h"
#include "ringtrain/sync/gradient_sync.h"

namespace ringtrain {

ParamGradientSync::ParamGradientSync(Communicator& comm, BufferView grads,
                                     std::size_t bucket_cap_bytes, bool overlap,
                                     void* compute_stream)
    : comm_(comm),
      grads_(grads),
      cap_bytes_(bucket_cap_bytes),
      overlap_(overlap),
      stream_(compute_stream) {
  RT_CHECK(grads.dtype == DType::f32, "gradient sync: the gradient buffer must be f32");
}

ParamGradientSync::~ParamGradientSync() = default;

std::size_t ParamGradientSync::add_param(std::string name, std::size_t offset, std::size_t count) {
  RT_CHECK(!plan_, "gradient sync: '{}' registered after the buckets were fixed", name);
  RT_CHECK(offset + count <= grads_.count,
           "gradient sync: '{}' at [{}, {}) lies outside the gradient buffer of {} elements", name,
           offset, offset + count, grads_.count);
  params_.push_back({std::move(name), offset, count});
  return params_.size() - 1;
}

void ParamGradientSync::plan() {
  if (plan_) return;
  RT_CHECK(!params_.empty(), "gradient sync: no parameter tensors registered");
  // Forward order, checked to tile the buffer from 0 without gaps.
  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  std::size_t expected = 0;
  for (std::size_t k = params_.size(); k-- > 0;) {
    const Param& p = params_[k];
    RT_CHECK(p.offset == expected,
             "gradient sync: '{}' starts at element {}, expected {}: register tensors in "
             "backward order, so that the last one registered starts at 0 and each one "
             "registered before it follows it in the buffer",
             p.name, p.offset, expected);
    ranges.emplace_back(p.offset, p.count);
    expected += p.count;
  }
  RT_CHECK(expected == grads_.count,
           "gradient sync: the registered tensors cover {} elements of a {}-element buffer",
           expected, grads_.count);
  plan_ = std::make_unique<BucketPlan>(ranges, sizeof(float), cap_bytes_);
  sync_ = std::make_unique<GradientSynchronizer>(comm_, *plan_, grads_, overlap_, stream_);
}

const BucketPlan& ParamGradientSync::buckets() {
  plan();
  return *plan_;
}

void ParamGradientSync::begin_step(bool sync) {
  plan();
  next_ready_ = 0;
  sync_->begin_step(sync);
}

void ParamGradientSync::mark_ready(std::size_t id) {
  RT_CHECK(sync_, "gradient sync: mark_ready before begin_step");
  RT_CHECK(id == next_ready_,
           "gradient sync: '{}' marked ready out of order (expected '{}': mark tensors in the "
           "order they were registered)",
           id < params_.size() ? params_[id].name : std::to_string(id),
           next_ready_ < params_.size() ? params_[next_ready_].name : std::string("none"));
  ++next_ready_;
  sync_->on_layer_ready(params_.size() - 1 - id);
}

void ParamGradientSync::wait() {
  RT_CHECK(sync_, "gradient sync: wait before begin_step");
  RT_CHECK(next_ready_ == params_.size(),
           "gradient sync: wait() with '{}' and {} more tensor(s) never marked ready",
           params_[next_ready_].name, params_.size() - next_ready_ - 1);
  sync_->finish();
}

double ParamGradientSync::exposed_seconds() const {
  return sync_ ? sync_->exposed_seconds() : 0.0;
}

}  // namespace ringtrain
