// See compute_load.h.
#include "ringtrain/perf/compute_load.h"

#include <chrono>
#include <memory>
#include <vector>

#include "ringtrain/core/timer.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/gemm.h"

namespace ringtrain {

namespace {

// One thread's 128 x 128 GEMMs; beta 0 overwrites C, so the values stay bounded.
class GemmLoop {
 public:
  GemmLoop()
      : ctx_(ComputeContext::create(Device::cpu())),
        a_(n * n, 0.5f),
        b_(n * n, 0.25f),
        c_(n * n, 0.0f) {}
  void once() {
    gemm(*ctx_, false, false, n, n, n, 1.0f, a_.data(), n, b_.data(), n, 0.0f, c_.data(), n);
  }

 private:
  static constexpr std::size_t n = 128;
  std::unique_ptr<ComputeContext> ctx_;
  std::vector<float> a_, b_, c_;
};

// The calling thread's own GEMM buffers, shared by sizing a burst and running it.
GemmLoop& this_thread_loop() {
  thread_local GemmLoop loop;
  return loop;
}

}  // namespace

ComputeLoad::ComputeLoad() {
  thread_ = std::thread([this] {
    GemmLoop loop;
    while (!stop_.load(std::memory_order_relaxed)) {
      loop.once();
      done_.fetch_add(1, std::memory_order_relaxed);
    }
  });
}

ComputeBurst::ComputeBurst(std::uint64_t gemms) : gemms_(gemms) {}

void ComputeBurst::run() {
  GemmLoop& loop = this_thread_loop();
  for (std::uint64_t i = 0; i < gemms_; ++i) loop.once();
}

double ComputeBurst::gemms_per_second(double seconds) {
  GemmLoop& loop = this_thread_loop();
  loop.once();  // first touch outside the timing
  std::uint64_t n = 0;
  Stopwatch sw;
  while (sw.seconds() < seconds) {
    loop.once();
    ++n;
  }
  return static_cast<double>(n) / sw.seconds();
}

ComputeLoad::~ComputeLoad() {
  stop_.store(true);
  thread_.join();
}

double ComputeLoad::rate_alone(double seconds) const {
  const std::uint64_t before = done();
  Stopwatch sw;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const double wall = sw.seconds();
  return wall > 0 ? static_cast<double>(done() - before) / wall : 0;
}

}  // namespace ringtrain
