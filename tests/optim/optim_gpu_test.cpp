// The CUDA optimizer updates, gradient norm and scaling against their CPU twins.
// Exits 77 (ctest: skipped) when CUDA is not compiled in or no device is visible.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <vector>

#include "optim/cuda_backend.h"
#include "ringtrain/core/host_sync.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/optim/grad_clip.h"
#include "ringtrain/optim/optimizer.h"
#include "tests/optim/optim_test_data.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;

namespace {

const Device kGpu = Device::cuda(0);

// A device copy of a host vector, freed on scope exit.
class DeviceVector {
 public:
  explicit DeviceVector(const std::vector<float>& host)
      : count_(host.size()), ptr_(optim_cuda::alloc_zeroed_f32(count_, kGpu.index)) {
    optim_cuda::copy_to_device(view(), host.data());
  }
  ~DeviceVector() { optim_cuda::free_f32(ptr_, kGpu.index); }
  DeviceVector(const DeviceVector&) = delete;
  DeviceVector& operator=(const DeviceVector&) = delete;
  BufferView view() const { return {ptr_, count_, DType::f32, kGpu}; }
  std::vector<float> to_host() const { return download(view()); }
  static std::vector<float> download(BufferView v) {
    std::vector<float> host(v.count);
    optim_cuda::copy_to_host(host.data(), v);
    return host;
  }

 private:
  std::size_t count_;
  float* ptr_;
};

// GPU arithmetic may contract a*b+c into one FMA where the CPU rounds twice; in
// AdamW that difference is amplified where m cancels and v is small. A slot or
// formula error is orders of magnitude larger than this tolerance.
std::size_t count_mismatches(const std::vector<float>& gpu, const std::vector<float>& cpu) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < cpu.size(); ++i)
    wrong += std::abs(gpu[i] - cpu[i]) > 1e-5f * (1.f + std::abs(cpu[i]));
  return wrong;
}

const std::vector<std::size_t> kGpuSizes = {0, 1, 255, 256, 257, 100003, (1u << 20) + 7};

void compare_optimizer(const OptimizerConfig& config) {
  for (std::size_t n : kGpuSizes) {
    CAPTURE(config.kind, config.momentum, config.nesterov, config.weight_decay, n);
    auto cpu = make_optimizer(config, n, Device::cpu());
    auto gpu = make_optimizer(config, n, kGpu);
    std::vector<float> p = test::test_vector(61, n, 2.f);
    DeviceVector dp(p);
    for (std::uint64_t s = 0; s < 3; ++s) {
      std::vector<float> g = test::test_vector(70 + s, n);
      DeviceVector dg(g);
      const float lr = 0.01f * static_cast<float>(s + 1);
      cpu->step(view_of(p.data(), n), view_of(g.data(), n), lr);
      gpu->step(dp.view(), dg.view(), lr);
    }
    CHECK(count_mismatches(dp.to_host(), p) == 0);
    const auto cpu_state = cpu->state();
    const auto gpu_state = gpu->state();
    REQUIRE(cpu_state.size() == gpu_state.size());
    for (std::size_t k = 0; k < cpu_state.size(); ++k) {
      CHECK(gpu_state[k].name == cpu_state[k].name);
      CHECK(gpu_state[k].view.device == kGpu);
      const std::vector<float> host_state(cpu_state[k].view.as<float>(),
                                          cpu_state[k].view.as<float>() + n);
      CHECK(count_mismatches(DeviceVector::download(gpu_state[k].view), host_state) == 0);
    }
    CHECK(gpu->step_count() == 3);
  }
}

}  // namespace

TEST_CASE("gpu sgd matches the cpu", "[gpu][optim]") {
  OptimizerConfig c;
  c.kind = "sgd";
  for (float momentum : {0.f, 0.9f})
    for (bool nesterov : {false, true})
      for (float wd : {0.f, 1e-2f}) {
        if (nesterov && momentum == 0.f) continue;
        c.momentum = momentum;
        c.nesterov = nesterov;
        c.weight_decay = wd;
        compare_optimizer(c);
      }
}

TEST_CASE("gpu adamw matches the cpu", "[gpu][optim]") {
  OptimizerConfig c;
  c.kind = "adamw";
  for (float wd : {0.f, 0.05f}) {
    c.weight_decay = wd;
    compare_optimizer(c);
  }
}

TEST_CASE("gpu grad norm, clip and scale match the cpu", "[gpu][optim]") {
  for (std::size_t n : kGpuSizes) {
    CAPTURE(n);
    std::vector<float> g = test::test_vector(81, n, 5.f);
    DeviceVector dg(g);
    const double cpu_norm = global_grad_norm(view_of(g.data(), n));
    const double gpu_norm = global_grad_norm(dg.view());
    CHECK(gpu_norm == Approx(cpu_norm).epsilon(1e-12));
    CHECK(global_grad_norm(dg.view()) == gpu_norm);  // deterministic: bit for bit

    scale_buffer(view_of(g.data(), n), 0.75f);
    scale_buffer(dg.view(), 0.75f);
    CHECK(dg.to_host() == g);  // one multiply: exact on both sides

    if (n > 0) {
      const double max_norm = 0.5 * cpu_norm;
      const double cpu_before = clip_grad_norm(view_of(g.data(), n), max_norm);
      const double gpu_before = clip_grad_norm(dg.view(), max_norm);
      CHECK(gpu_before == Approx(cpu_before).epsilon(1e-12));
      CHECK(count_mismatches(dg.to_host(), g) == 0);
    }
  }
}

TEST_CASE("gpu clip on the device: the cpu's result, no host sync", "[gpu][optim]") {
  GradClipper cpu(Device::cpu());
  GradClipper gpu(kGpu);
  for (std::size_t n : kGpuSizes) {
    CAPTURE(n);
    std::vector<float> g = test::test_vector(83, n, 5.f);
    DeviceVector dg(g);
    const std::uint64_t syncs = host_sync::count();
    gpu.sum_squares(dg.view(), nullptr);
    gpu.clip(dg.view(), 0.5, nullptr);
    (void)gpu.finite_probe(nullptr);
    CHECK(host_sync::count() == syncs);  // nothing read back
    cpu.sum_squares(view_of(g.data(), n), nullptr);
    cpu.clip(view_of(g.data(), n), 0.5, nullptr);
    CHECK(gpu.norm() == Approx(cpu.norm()).epsilon(1e-12));
    CHECK(count_mismatches(dg.to_host(), g) == 0);
  }
}

TEST_CASE("gpu decay mask matches the cpu", "[gpu][optim]") {
  for (const char* kind : {"sgd", "adamw"}) {
    OptimizerConfig c;
    c.kind = kind;
    c.weight_decay = 0.1f;
    const std::size_t n = 100003;
    std::vector<float> mask(n);
    for (std::size_t i = 0; i < n; ++i) mask[i] = i % 3 == 0 ? 0.f : 1.f;
    DeviceVector dmask(mask);
    auto cpu = make_optimizer(c, n, Device::cpu());
    auto gpu = make_optimizer(c, n, kGpu);
    cpu->set_decay_mask(view_of(mask.data(), n));
    gpu->set_decay_mask(dmask.view());
    std::vector<float> p = test::test_vector(91, n, 2.f);
    DeviceVector dp(p);
    for (std::uint64_t s = 0; s < 3; ++s) {
      std::vector<float> g = test::test_vector(95 + s, n);
      DeviceVector dg(g);
      cpu->step(view_of(p.data(), n), view_of(g.data(), n), 0.05f);
      gpu->step(dp.view(), dg.view(), 0.05f);
    }
    CAPTURE(kind);
    CHECK(count_mismatches(dp.to_host(), p) == 0);
  }
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  std::printf("device 0: %s\n", cuda_device_name(0).c_str());
  return Catch::Session().run(argc, argv);
}
