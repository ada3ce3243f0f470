// Fused conv + bias + ReLU on a GPU. The passes (ops/bias_relu.h) against the
// unfused GPU ops they replace, bit for bit (the same arithmetic, and the bias
// gradient through the same reduction in the same order), and against the
// CPU: the elementwise results bit for bit, the bias gradient within fp32
// accumulation error (another summation order). Shapes large enough that the
// reduction is split over row slices. Then a VGG-like model on the GPU, fused
// against --fuse off, bit for bit (cuDNN's algorithms are chosen by heuristics
// among the deterministic ones, the same for both plans), under fp32, bf16
// and fp16 in both layouts, and its loss against the CPU's. Exits 77 (ctest:
// skipped) without CUDA or a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/precision.cuh"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/ops/activation.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/ops/bias_relu.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/branch_first_graph.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

// The 32-bit patterns of a tensor's values, widened on the host (exact).
std::vector<std::uint32_t> bits(const Tensor& t, const ComputeContext& ctx) {
  const std::vector<float> v = widened_values(t, ctx);
  std::vector<std::uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), b.size() * sizeof(float));
  return b;
}

struct Passes {
  Tensor y_fused, y_in_place, y_unfused;  // from fp32 x; in place on stored x; bias_add + relu
  Tensor masked, masked_wide, db, db_wide, db_unfused;
};

// Both fused passes and the unfused ops they replace, on ctx's device.
Passes run(const ComputeContext& ctx, const ComputeContext& cpu, DType t, std::size_t outer,
           std::size_t channels, std::size_t inner, bool accumulate) {
  const Device dev = ctx.device();
  const std::size_t n = outer * channels * inner;
  // The convolution's output on t's grid, as the fp32 interface of a 16-bit
  // context rounds it: then the fused pass from fp32 x and the unfused pair
  // from stored x round the same sum once.
  const std::vector<float> conv = on_grid(hashed_vector(1, n, -2.0f, 2.0f), t);
  const std::vector<float> bias_host = hashed_vector(2, channels, -0.5f, 0.5f);
  const std::vector<float> previous = hashed_vector(4, channels, -3.0f, 3.0f);
  const auto on = [&](const std::vector<float>& v) { return stored(v, DType::f32, dev, cpu); };
  Tensor x_wide = on(conv), bias = on(bias_host);
  Passes p;
  p.y_fused = Tensor::empty({n}, t, dev);
  bias_relu_into(ctx, p.y_fused.buffer(), x_wide.buffer(), bias.data_as<float>(), outer, channels,
                 inner);
  p.y_in_place = stored(conv, t, dev, cpu);
  bias_relu_into(ctx, p.y_in_place.buffer(), p.y_in_place.buffer(), bias.data_as<float>(), outer,
                 channels, inner);
  Tensor sum = stored(conv, t, dev, cpu);
  bias_add(ctx, sum.buffer(), bias.data_as<float>(), outer, channels, inner);
  p.y_unfused = Tensor::empty({n}, t, dev);
  relu_forward(ctx, sum.buffer(), p.y_unfused.buffer());
  // Backward from the fused y.
  Tensor dy = stored(hashed_vector(3, n, -1.0f, 1.0f), t, dev, cpu);
  // NaN to start with: an element the reduction did not store shows.
  const std::vector<float> nan(n, std::numeric_limits<float>::quiet_NaN());
  p.masked = stored(nan, t, dev, cpu);
  p.masked_wide = stored(nan, DType::f32, dev, cpu);
  p.db = on(previous);
  p.db_wide = on(previous);
  p.db_unfused = on(previous);
  relu_mask_bias_grad(ctx, p.y_fused.buffer(), dy.buffer(), p.masked.buffer(),
                      p.db.data_as<float>(), outer, channels, inner, accumulate);
  relu_mask_bias_grad(ctx, p.y_fused.buffer(), dy.buffer(), p.masked_wide.buffer(),
                      p.db_wide.data_as<float>(), outer, channels, inner, accumulate);
  Tensor relu_dx = Tensor::empty({n}, t, dev);
  relu_backward(ctx, p.y_fused.buffer(), dy.buffer(), relu_dx.buffer());
  bias_grad(ctx, relu_dx.buffer(), p.db_unfused.data_as<float>(), outer, channels, inner,
            accumulate);
  return p;
}

const char* kVggLike = R"(input(3, 16, 16)
c1 = conv2d(out=8, kernel=3, padding=1)
r1 = relu
c2 = conv2d(out=16, kernel=3, padding=1, stride=2)
r2 = relu
c3 = conv2d(out=16, kernel=3, padding=1)
r3 = relu
sum = add(r3, r2)
pool = max_pool2d(kernel=2, stride=2)
c4 = conv2d(out=32, kernel=3, padding=1)
r4 = relu
flat = flatten
fc = linear(out=5)
)";

}  // namespace

TEST_CASE("gpu fused bias + relu passes against the unfused GPU ops and the CPU", "[gpu][fusion]") {
  Contexts c;
  const DType t = GENERATE(DType::f32, DType::bf16, DType::f16);
  const int shape = GENERATE(0, 1, 2);
  const bool rows = shape != 0;
  const bool accumulate = GENERATE(false, true);
  // NCHW [64, 5, 32x32]; NHWC rows [4096, 37, 1]: both split into slices;
  // rows [4096, 40, 1], which take 8 channels a thread (16-byte accesses).
  const std::size_t outer = rows ? 4096 : 64,
                    channels = shape == 0   ? 5
                               : shape == 1 ? 37
                                            : 40,
                    inner = rows ? 1 : 1024;
  INFO(dtype_name(t) << (rows ? " rows" : " planes") << ", " << channels << " channels"
                     << (accumulate ? " accumulate" : ""));
  auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, t);
  auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, t);
  const Passes want = run(*cpu, *c.cpu, t, outer, channels, inner, accumulate);
  const Passes got = run(*gpu, *c.cpu, t, outer, channels, inner, accumulate);
  const auto b = [&](const Tensor& x, const ComputeContext& ctx) { return bits(x, ctx); };
  // The GPU's fused passes give the GPU's unfused bits.
  CHECK(b(got.y_fused, *gpu) == b(got.y_unfused, *gpu));
  CHECK(b(got.y_in_place, *gpu) == b(got.y_unfused, *gpu));
  CHECK(b(got.db, *gpu) == b(got.db_unfused, *gpu));
  CHECK(b(got.db_wide, *gpu) == b(got.db_unfused, *gpu));
  // Elementwise: the CPU's bits.
  CHECK(b(got.y_fused, *gpu) == b(want.y_fused, *cpu));
  CHECK(b(got.y_in_place, *gpu) == b(want.y_in_place, *cpu));
  CHECK(b(got.masked, *gpu) == b(want.masked, *cpu));
  CHECK(b(got.masked_wide, *gpu) == b(want.masked_wide, *cpu));
  // The reduction: another order.
  require_close(widened_values(got.db, *gpu), widened_values(want.db, *cpu), 1e-4, "dbias");
}

TEST_CASE("gpu fused conv + bias + relu: the unfused plan's bits, and the CPU's loss",
          "[gpu][fusion][model]") {
  const bool branch_first = GENERATE(false, true);
  const DType precision = GENERATE(DType::f32, DType::bf16, DType::f16);
  const LayoutChoice layout = GENERATE(LayoutChoice::nchw, LayoutChoice::nhwc);
  INFO((branch_first ? "branch first, " : "vgg-like, ")
       << dtype_name(precision) << (layout == LayoutChoice::nhwc ? " nhwc" : " nchw"));
  const ModelSpec spec = ModelSpec::parse(branch_first ? kBranchFirst : kVggLike);
  constexpr std::size_t kBatch = 8, kClasses = 5;
  const std::vector<std::size_t> input =
      branch_first ? std::vector<std::size_t>{3, 8, 8} : std::vector<std::size_t>{3, 16, 16};
  const std::size_t kIn = input[0] * input[1] * input[2];
  // c1's parameters, first in the flat buffer: only the summed gradient of
  // r1 reaches them.
  const std::size_t c1_params = branch_first ? kBranchFirstC1Params : 8 * 3 * 3 * 3 + 8;
  const auto build = [&](Device device, bool fuse) {
    ModelOptions o;
    o.device = device;
    o.seed = 7;
    o.max_batch = kBatch;
    o.precision = precision;
    o.layout = layout;
    o.fuse = fuse;
    o.tf32 = Tf32Mode::off;
    return Model::build(spec, input, static_cast<int>(kClasses), o);
  };
  auto fused = build(kGpu, true), plain = build(kGpu, false), cpu = build(Device::cpu(), true);
  REQUIRE(fused->layer_kernels(branch_first ? 4 : 3).rfind("fused c2+r2: ", 0) == 0);
  const std::vector<float> x_host = hashed_vector(31, kBatch * kIn, -2.0f, 2.0f);
  const std::vector<std::int32_t> labels_host{0, 4, 2, 1, 3, 0, 1, 2};
  Tensor x = to_gpu(x_host), labels = to_gpu(labels_host);
  const float scale = precision == DType::f16 ? 1024.0f : 1.0f;
  const auto grads_of = [&](Model& m) {
    m.synchronize();
    std::vector<std::uint32_t> g(m.param_count());
    Tensor::borrow(g.data(), {g.size()}, DType::f32, Device::cpu())
        .copy_from(Tensor::borrow(m.grads().ptr, {g.size()}, DType::f32, kGpu));
    return g;
  };
  double loss[2];
  int k = 0;
  for (Model* m : {fused.get(), plain.get()}) {
    loss[k++] =
        m->forward(x.data_as<float>(), labels.data_as<std::int32_t>(), kBatch, true).loss_sum;
    m->backward(scale, false);
  }
  CHECK(loss[0] == loss[1]);
  CHECK(grads_of(*fused) == grads_of(*plain));
  {
    // Against the CPU, whose convolutions go through the fp32 adapter (the
    // branch points summed from fp32 scratch): within the 16-bit tolerance
    // that GPU and CPU steps are compared with.
    cpu->forward(x_host.data(), labels_host.data(), kBatch, true);
    cpu->backward(scale, false);
    std::vector<float> g_gpu(fused->param_count());
    fused->synchronize();
    Tensor::borrow(g_gpu.data(), {g_gpu.size()}, DType::f32, Device::cpu())
        .copy_from(Tensor::borrow(fused->grads().ptr, {g_gpu.size()}, DType::f32, kGpu));
    const float* g_cpu = static_cast<const float*>(cpu->grads().ptr);
    // A one-step relu mask flip moves a 16-bit gradient element whole: the
    // tolerance catches a lost or doubled contribution, not the flips.
    const double gtol = precision == DType::f32 ? 1e-4 : precision == DType::bf16 ? 1e-1 : 3e-2;
    const auto relative = [&](std::size_t begin, std::size_t end) {
      double diff = 0.0, norm = 0.0;
      for (std::size_t i = begin; i < end; ++i) {
        diff += (double(g_gpu[i]) - g_cpu[i]) * (double(g_gpu[i]) - g_cpu[i]);
        norm += double(g_cpu[i]) * g_cpu[i];
      }
      return norm > 0.0 ? std::sqrt(diff / norm) : 1.0;
    };
    INFO("relative gradient difference against the CPU: all " << relative(0, g_gpu.size())
                                                              << ", c1 " << relative(0, c1_params));
    CHECK(relative(0, g_gpu.size()) <= gtol);
    CHECK(relative(0, c1_params) <= gtol);
  }
  k = 0;
  for (Model* m : {fused.get(), plain.get()}) {
    loss[k++] =
        m->forward(x.data_as<float>(), labels.data_as<std::int32_t>(), kBatch, true).loss_sum;
    m->backward(scale, true);
  }
  CHECK(loss[0] == loss[1]);
  CHECK(grads_of(*fused) == grads_of(*plain));
  const double cpu_loss = cpu->forward(x_host.data(), labels_host.data(), kBatch, false).loss_sum;
  const double gpu_loss =
      fused->forward(x.data_as<float>(), labels.data_as<std::int32_t>(), kBatch, false).loss_sum;
  const double tol = precision == DType::f32 ? 1e-4 : 3e-2;
  CHECK(std::abs(gpu_loss - cpu_loss) <= tol * (1.0 + std::abs(cpu_loss)));
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
