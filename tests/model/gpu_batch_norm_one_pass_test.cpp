// BatchNorm's training statistics on a GPU (one pass over x: Welford partials
// merged in a fixed order, kernels/batch_norm.cu) against their CPU twin
// (ops/batch_norm_one_pass.h), which takes the same partition, the same merge
// order and the same functions, every product and sum rounded on its own on
// both sides: saved.mean, saved.invstd and the count slot must agree bit for
// bit, and two GPU runs must too. fp32 (hard data: mean 1000, std 0.01),
// bf16 and fp16 storage; NCHW with many slices and with one, rows (NHWC /
// features) with many slices and with one, with 8 | C (a thread per 8
// channels) and without, one element per channel; with a
// one-rank --sync-bn reducer (its sums change nothing) the two-all-reduce
// steps too. Exits 77 (ctest: skipped) without CUDA or a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/batch_norm.cuh"
#include "kernels/batch_norm_welford.cuh"
#include "ops/batch_norm_one_pass.h"
#include "ops/gpu_ops.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/ops/batch_norm.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/batch_norm_data.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

constexpr float kEps = 1e-5f;

// One rank's --sync-bn: the sums over the ranks are this rank's.
struct OneRank : BatchStatReducer {
  void sum(float*, std::size_t) override {}
};

struct Stats {
  std::vector<float> mean, invstd;
  float count = 0;
};

Stats on_gpu(const ComputeContext& ctx, const Batch& b, bool sync) {
  const std::size_t total = b.n * b.c * b.hw, C = b.c;
  Tensor x = Tensor::empty({total}, b.t, kGpu);
  // Rows of 8 | C channels take the 8-channel kernel only from an aligned x.
  REQUIRE(reinterpret_cast<std::uintptr_t>(x.data()) % 16 == 0);
  x.copy_from(Tensor::borrow(const_cast<void*>(b.data()), {total}, b.t, Device::cpu()));
  Tensor y = Tensor::empty({total}, b.t, kGpu);
  Tensor mean = Tensor::zeros({C}, DType::f32, kGpu), invstd = Tensor::zeros({C}, DType::f32, kGpu);
  Tensor sums = Tensor::zeros({2 * C + 1}, DType::f32, kGpu);
  const BatchNormSaved saved{mean.data_as<float>(), invstd.data_as<float>(), sums.data_as<float>()};
  OneRank one;
  batch_norm_forward(ctx, BatchNormShape{C, b.hw}, x.buffer(), y.buffer(), b.n, true, false, kEps,
                     0.1f, nullptr, nullptr, nullptr, nullptr, saved, sync ? &one : nullptr);
  Stats s;
  s.mean = to_host(mean, ctx);
  s.invstd = to_host(invstd, ctx);
  s.count = to_host(sums, ctx)[2 * C];
  return s;
}

// The twin, then what the GPU's last steps make of its partials: with one
// rank's --sync-bn, the global mean and M2 of kernels::welford_rank_kernel;
// then finalize's invstd.
Stats on_cpu(const Batch& b, bool sync) {
  std::vector<float> mean(b.c), m2(b.c);
  float count = 0;
  detail::one_pass_statistics_twin(b.data(), b.t, b.n, b.c, b.hw, detail::kGpuScratchFloats,
                                   mean.data(), m2.data(), &count);
  Stats s;
  s.count = count;
  for (std::size_t ch = 0; ch < b.c; ++ch) {
    float mu = mean[ch], q = m2[ch];
    if (sync) {
      mu = kernels::welford_global_mean(kernels::welford_weighted_mean(count, mean[ch]), count);
      q = kernels::welford_rank_m2(m2[ch], count, mean[ch], mu);
    }
    s.mean.push_back(mu);
    s.invstd.push_back(kernels::bn_invstd(q / count, kEps));
  }
  return s;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("gpu one-pass batch_norm statistics against the CPU twin, bit for bit",
          "[gpu][batch_norm][one_pass]") {
  const DType t = GENERATE(DType::f32, DType::bf16, DType::f16);
  const bool sync = GENERATE(false, true);
  struct Case {
    const char* name;
    std::size_t n, c, hw;
  };
  const Case cases[] = {
      {"nchw, several slices", 300, 3, 49},
      {"nchw, one channel, 64 slices", 64, 1, 112 * 112},
      // Past one chunk of the slices' merge (64 slices), and a second block
      // of channels with lanes past the last channel.
      {"nchw, one channel, 100 slices", 100, 1, 4096},
      {"rows, 37 channels, 125 slices", 8000, 37, 1},
      // 8 | channels: 8 channels of a row a thread (welford_rows8_kernel).
      {"rows, 40 channels, several slices", 1000, 40, 1},
      {"rows, 64 channels, 125 slices", 8000, 64, 1},
      {"rows, 8 channels, two slices", 3 * 63, 8, 1},
      // One slice: the kernels finish their channels themselves.
      {"rows, 8 channels, one slice", 100, 8, 1},
      {"rows, 40 channels, one slice", 127, 40, 1},
      {"nchw 7x9, one slice", 3, 5, 63},
      {"nchw, a plane wider than a block", 20, 2, 300},
      {"rows, 37 channels, several slices", 1000, 37, 1},
      {"rows, two slices", 3 * 63, 5, 1},
      {"rows, one slice", 100, 5, 1},
      {"one element per channel", 1, 5, 1},
  };
  const std::vector<double> means = t == DType::bf16  ? std::vector<double>{50.0, -20.0, 3.0}
                                    : t == DType::f16 ? std::vector<double>{300.0, -40.0, 1.5}
                                                      : std::vector<double>{1000.0, -1000.0, 999.5};
  const double stddev = t == DType::f32 ? 0.01 : 2.0;
  const auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, t);
  for (const Case& k : cases) {
    INFO(dtype_name(t) << " " << k.name << (sync ? ", one-rank --sync-bn" : ""));
    const Batch b = make_batch(t, k.n, k.c, k.hw, means, stddev, 21);
    const Stats want = on_cpu(b, sync);
    const Stats got = on_gpu(*gpu, b, sync);
    CHECK(got.count == want.count);
    CHECK(same_bits(got.mean, want.mean));
    CHECK(same_bits(got.invstd, want.invstd));
    const Stats again = on_gpu(*gpu, b, sync);
    CHECK(same_bits(got.mean, again.mean));
    CHECK(same_bits(got.invstd, again.invstd));
  }
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
