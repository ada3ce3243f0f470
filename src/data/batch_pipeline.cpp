#include "data/batch_pipeline.h"

#include "data/device_widening.h"

#include "ringtrain/core/check.h"
#include "ringtrain/core/timer.h"

namespace ringtrain {

BatchPipeline::BatchPipeline(Dataset& dataset, std::size_t max_batch, Plan plan, std::size_t depth,
                             Device device)
    : dataset_(dataset), max_batch_(max_batch), plan_(std::move(plan)), device_(device) {
  RT_CHECK(depth >= 1, "prefetch depth must be >= 1, got {}", depth);
  RT_CHECK(max_batch >= 1, "batch size must be >= 1, got {}", max_batch);
  const bool gpu = device.is_cuda();
  if (gpu) widening_ = device_widening(dataset);
  const std::size_t elems = max_batch * dataset.sample_elements();
  const std::size_t x_bytes = elems * sizeof(float);
  const std::size_t y_bytes = max_batch * dataset.labels_per_sample() * sizeof(std::int32_t);
  slots_.resize(depth + 1);
  for (Slot& s : slots_) {
    s.host_x = std::make_unique<HostStagingBuffer>(widening_ ? elems : x_bytes, gpu);
    s.host_y = std::make_unique<HostStagingBuffer>(y_bytes, gpu);
    if (gpu) {
      s.dev_x = std::make_unique<DeviceStagingBuffer>(x_bytes, device);
      s.dev_y = std::make_unique<DeviceStagingBuffer>(y_bytes, device);
      if (widening_) s.dev_bytes = std::make_unique<DeviceStagingBuffer>(elems, device);
    }
  }
  if (gpu) stream_ = std::make_unique<CopyStream>(device);
  thread_ = std::thread([this] { run(); });
}

BatchPipeline::~BatchPipeline() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  space_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void BatchPipeline::run() {
  try {
    if (stream_) stream_->bind_thread();
    std::vector<std::uint64_t> indices;
    for (std::uint64_t k = 0;; ++k) {
      {
        std::unique_lock lock(mutex_);
        space_cv_.wait(lock, [&] { return stop_ || k < released_ + slots_.size(); });
        if (stop_) return;
      }
      DataCursor cursor;
      indices.clear();
      if (!plan_(k, indices, cursor)) {
        std::lock_guard lock(mutex_);
        end_ = true;
        ready_cv_.notify_all();
        return;
      }
      RT_CHECK(indices.size() <= max_batch_, "batch of {} samples exceeds the slot size {}",
               indices.size(), max_batch_);
      Slot& s = slots_[k % slots_.size()];
      OrderingPoint reuse_after;
      {
        std::lock_guard lock(mutex_);
        reuse_after = std::move(s.reuse_after);
        s.reuse_after = {};
      }
      auto* y = static_cast<std::int32_t*>(s.host_y->data());
      const std::size_t n = indices.size() * dataset_.sample_elements();
      if (widening_)
        dataset_.read_bytes(indices, static_cast<std::uint8_t*>(s.host_x->data()), y, cursor.epoch);
      else
        dataset_.read(indices, static_cast<float*>(s.host_x->data()), y, cursor.epoch);
      if (stream_) {
        // The slot's device copy may still be read by queued kernels.
        reuse_after.order_stream(stream_->stream());
        if (widening_) {
          stream_->copy_to_device(s.dev_bytes->data(), s.host_x->data(), n);
          stream_->widen_bytes(s.dev_bytes->data(), static_cast<float*>(s.dev_x->data()), n,
                               *widening_);
        } else {
          stream_->copy_to_device(s.dev_x->data(), s.host_x->data(), n * sizeof(float));
        }
        stream_->copy_to_device(
            s.dev_y->data(), y,
            indices.size() * dataset_.labels_per_sample() * sizeof(std::int32_t));
        stream_->synchronize();
      }
      s.size = indices.size();
      s.cursor = cursor;
      {
        std::lock_guard lock(mutex_);
        produced_.store(k + 1, std::memory_order_release);
      }
      ready_cv_.notify_one();
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
    ready_cv_.notify_all();
  }
}

std::optional<Batch> BatchPipeline::next(const OrderingPoint& previous_done) {
  Stopwatch wait;
  std::unique_lock lock(mutex_);
  // The batch handed out before is done with (once previous_done is reached):
  // its slot may be refilled.
  if (handed_out_ > released_) {
    slots_[(handed_out_ - 1) % slots_.size()].reuse_after = previous_done;
    released_ = handed_out_;
    space_cv_.notify_one();
  }
  const std::uint64_t k = handed_out_;
  if (produced_.load(std::memory_order_acquire) <= k && !end_ && !error_) {
    // Poll for up to ~50 us (yielding the core) before sleeping on the
    // condition variable: a loader just behind is cheaper to wait for so.
    lock.unlock();
    for (int i = 0; i < 64 && produced_.load(std::memory_order_acquire) <= k; ++i) {
      if (wait.micros() > 50) break;
      std::this_thread::yield();
    }
    lock.lock();
  }
  ready_cv_.wait(lock, [&] { return produced_ > k || end_ || error_; });
  if (produced_.load() <= k) {
    if (error_) std::rethrow_exception(error_);
    return std::nullopt;  // end of the plan
  }
  Slot& s = slots_[k % slots_.size()];
  ++handed_out_;
  lock.unlock();
  const std::size_t elems = dataset_.sample_elements();
  Batch b;
  void* x = device_.is_cuda() ? s.dev_x->data() : s.host_x->data();
  void* y = device_.is_cuda() ? s.dev_y->data() : s.host_y->data();
  b.x = BufferView{x, s.size * elems, DType::f32, device_};
  b.y = BufferView{y, s.size * dataset_.labels_per_sample(), DType::i32, device_};
  b.size = s.size;
  b.cursor = s.cursor;
  b.wait_seconds = wait.seconds();
  return b;
}

}  // namespace ringtrain
