// The --nonfinite guard on a GPU: the checks, the decision and a gated SGD
// update are queued with no host sync, a bad step's update is a no-op on the
// device, and the host reads the decision from the mirror after its next
// synchronisation. Exits 77 (ctest: skipped) without CUDA or a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "optim/nonfinite_tracker.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/host_sync.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;

namespace {

const Device kGpu = Device::cuda(0);

std::vector<float> download(BufferView v) {
  std::vector<float> host(v.count);
  copy_view(view_of(host.data(), host.size()), v);
  return host;
}

}  // namespace

TEST_CASE("gpu guard: decided on the device, no host sync per step, bad update a no-op",
          "[gpu][optim][nonfinite]") {
  constexpr std::size_t n = 3000;
  Tensor params = Tensor::zeros({n}, DType::f32, kGpu);
  Tensor grads = Tensor::zeros({n}, DType::f32, kGpu);
  Tensor totals = Tensor::zeros({3}, DType::f64, kGpu);
  std::vector<float> g(n, 0.5f);
  copy_view(grads.buffer(), view_of(g.data(), n));
  NonfiniteTracker tracker(kGpu, /*max_consecutive_skips=*/1, totals.buffer());
  OptimizerConfig config;
  config.kind = "sgd";
  config.momentum = 0.f;
  auto sgd = make_optimizer(config, n, kGpu);
  sgd->set_update_gate(tracker.gate());
  const BufferView p = params.buffer(), gv = grads.buffer();

  auto run_step = [&](std::uint64_t step) {
    tracker.begin_step(nullptr);
    tracker.check_local(gv.slice(n / 2, n - n / 2), n / 2, nullptr);
    tracker.check_local(gv.slice(0, n / 2), 0, nullptr);
    CHECK(tracker.decide(step, gv, 8, nullptr));  // the host does not know yet
    sgd->step(p, gv, 1.f);
  };

  const std::uint64_t syncs = host_sync::count();
  run_step(1);
  CHECK(host_sync::count() == syncs);
  host_sync::wait_device(kGpu, "test");
  CHECK(tracker.observed().decided == 1);
  const std::vector<float> after_good = download(p);
  CHECK(after_good[0] == -0.5f);

  g[1234] = std::numeric_limits<float>::quiet_NaN();
  copy_view(grads.buffer(), view_of(g.data(), n));
  const std::uint64_t syncs2 = host_sync::count();
  run_step(2);
  CHECK(host_sync::count() == syncs2);
  host_sync::wait_device(kGpu, "test");
  const kernels::NonfiniteGuardState s = tracker.observed();
  CHECK(s.skipped == 1);
  CHECK(s.last_bad_step == 2);
  CHECK(s.index_at_last_bad == 1234);
  CHECK(s.local_at_last_bad == kernels::kLocalGradientsBad);
  CHECK(download(p) == after_good);  // the skipped update changed nothing

  run_step(3);  // the second consecutive bad step of skip:1: stop
  host_sync::wait_device(kGpu, "test");
  CHECK(tracker.observed().stopped == 1);
  CHECK(tracker.observed().stop_step == 3);
  g[1234] = 0.5f;
  copy_view(grads.buffer(), view_of(g.data(), n));
  tracker.begin_step(nullptr);
  tracker.check_local(gv, 0, nullptr);
  CHECK_FALSE(tracker.decide(4, gv, 8, nullptr));  // the host knows it stopped
  sgd->step(p, gv, 1.f);
  host_sync::wait_device(kGpu, "test");
  CHECK(download(p) == after_good);  // latched: no update after the stop
}

TEST_CASE("gpu guard: a skipped AdamW step leaves moments and step count as a CPU run without it",
          "[gpu][optim][nonfinite]") {
  constexpr std::size_t n = 4099;
  OptimizerConfig config;
  config.kind = "adamw";
  config.weight_decay = 0.01f;
  auto cpu = make_optimizer(config, n, Device::cpu());
  auto gpu = make_optimizer(config, n, kGpu);
  Tensor totals = Tensor::zeros({3}, DType::f64, kGpu);
  NonfiniteTracker tracker(kGpu, /*max_consecutive_skips=*/3, totals.buffer());
  gpu->set_update_gate(tracker.gate());
  std::vector<float> p(n), g(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = std::sin(0.1f * static_cast<float>(i));
  Tensor dp = Tensor::zeros({n}, DType::f32, kGpu), dg = Tensor::zeros({n}, DType::f32, kGpu);
  copy_view(dp.buffer(), view_of(p.data(), n));
  // Steps 1, 3 and 4 are good; step 2 has a NaN and is skipped on the GPU and
  // not taken on the CPU: AdamW's bias correction must count 1, 2, 3.
  for (std::uint64_t step = 1; step <= 4; ++step) {
    for (std::size_t i = 0; i < n; ++i)
      g[i] = std::cos(0.05f * static_cast<float>(i * step)) * 0.1f;
    if (step == 2) g[17] = std::numeric_limits<float>::infinity();
    copy_view(dg.buffer(), view_of(g.data(), n));
    tracker.begin_step(nullptr);
    tracker.check_local(dg.buffer(), 0, nullptr);
    tracker.decide(step, dg.buffer(), 1, nullptr);
    gpu->step(dp.buffer(), dg.buffer(), 0.01f);
    if (step != 2) cpu->step(view_of(p.data(), n), view_of(g.data(), n), 0.01f);
  }
  host_sync::wait_device(kGpu, "test");
  CHECK(tracker.observed().skipped == 1);
  const std::vector<float> gp = download(dp.buffer());
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < n; ++i)
    wrong += std::abs(gp[i] - p[i]) > 1e-5f * (1.f + std::abs(p[i]));
  CHECK(wrong == 0);
  const auto cs = cpu->state(), gs = gpu->state();
  for (std::size_t k = 0; k < cs.size(); ++k) {
    const std::vector<float> d = download(gs[k].view);
    std::size_t off = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const float c = cs[k].view.as<float>()[i];
      off += std::abs(d[i] - c) > 1e-5f * (1.f + std::abs(c));
    }
    CHECK(off == 0);
  }
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  std::printf("device 0: %s\n", cuda_device_name(0).c_str());
  return Catch::Session().run(argc, argv);
}
