// See compute_load.h.
#include "apps/compute_load.h"

#include <chrono>
#include <vector>

#include "ringtrain/core/timer.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/gemm.h"

namespace ringtrain::apps {

ComputeLoad::ComputeLoad() {
  thread_ = std::thread([this] {
    constexpr std::size_t n = 128;
    const auto ctx = ComputeContext::create(Device::cpu());
    std::vector<float> a(n * n, 0.5f), b(n * n, 0.25f), c(n * n, 0.0f);
    while (!stop_.load(std::memory_order_relaxed)) {
      // beta 0: C is overwritten, so the values stay bounded.
      gemm(*ctx, false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      done_.fetch_add(1, std::memory_order_relaxed);
    }
  });
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

}  // namespace ringtrain::apps
