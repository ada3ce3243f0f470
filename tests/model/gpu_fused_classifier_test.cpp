// The fused classifier's kernels (one thread per narrow row, one warp per wide
// row) against the two-pass kernels on the same GPU: the same row losses,
// correct flags (through the totals) and gradient bits, under fp32, bf16 and
// fp16 logits, with label smoothing, a mix's second label, ignored rows, in
// place and into an fp32 buffer, in rows of the classes or padded (the tied
// head's logits: garbage in the padding changes nothing, the gradient's
// padding is written 0, and the padded rows give the unpadded run's totals
// and gradient). Exits 77 (ctest: skipped) without CUDA or a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/test_data.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

std::vector<unsigned char> bytes_of(const BufferView& v, const ComputeContext& ctx) {
  ctx.synchronize();
  std::vector<unsigned char> out(v.bytes());
  Tensor::borrow(out.data(), {v.count}, v.dtype, Device::cpu())
      .copy_from(Tensor::borrow(v.ptr, {v.count}, v.dtype, v.device));
  return out;
}

}  // namespace

TEST_CASE("gpu fused classifier against the two-pass kernels, bit for bit", "[gpu][fusion]") {
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  const std::size_t classes = GENERATE(7u, 600u, 50257u);
  const float smoothing = GENERATE(0.0f, 0.1f);
  const bool mixed = GENERATE(false, true);
  const bool in_place = GENERATE(true, false);
  const bool padded = GENERATE(false, true);
  // A multiple of 64 above classes, as the tied head pads.
  const std::size_t stride = padded ? (classes / 64 + 1) * 64 : classes;
  INFO(dtype_name(p) << ", " << classes << " classes " << stride << " apart, smoothing "
                     << smoothing << (mixed ? ", mixed" : "")
                     << (in_place ? ", in place" : ", fp32 buffer"));
  auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
  auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
  const std::size_t rows = 37, n = rows * stride;
  std::vector<std::int32_t> labels(rows), second(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    labels[i] = i % 9 == 4 ? -100 : static_cast<std::int32_t>((i * 5 + 2) % classes);
    second[i] = static_cast<std::int32_t>((i * 3 + 1) % classes);
  }
  Tensor labels_gpu = to_gpu(labels), second_gpu = to_gpu(second);
  const LabelMix mix = mixed ? LabelMix{second_gpu.data_as<std::int32_t>(), 0.7f} : LabelMix{};
  // The same logits in every row's first `classes`, whatever the stride; a
  // large value in the padding, which would win every row if it were read.
  const std::vector<float> compact = hashed_vector(17, rows * classes, -6.0f, 6.0f);
  std::vector<float> wide(n, 1000.0f);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < classes; ++j) wide[r * stride + j] = compact[r * classes + j];
  Tensor host = Tensor::empty({n}, p, Device::cpu());
  convert_storage(*cpu, host.buffer(), view_of(wide.data(), n));
  const float scale = 3.0f / static_cast<float>(rows);
  Tensor row_loss = Tensor::empty({rows}, DType::f32, kGpu);
  Tensor row_correct = Tensor::empty({rows}, DType::i32, kGpu);
  std::vector<std::vector<unsigned char>> grads, totals;
  for (bool fused : {false, true}) {
    Tensor z = Tensor::empty({n}, p, kGpu);
    z.copy_from(host);
    Tensor g = Tensor::empty({n}, DType::f32, kGpu);
    const BufferView dz = in_place ? z.buffer() : g.buffer();
    Tensor t = Tensor::zeros({3}, DType::f64, kGpu);
    if (fused) {
      softmax_cross_entropy_accumulate_backward(
          *gpu, z.buffer(), labels_gpu.data_as<std::int32_t>(), rows, classes, stride,
          row_loss.data_as<float>(), row_correct.data_as<std::int32_t>(), t.data_as<double>(),
          scale, dz, smoothing, mix);
    } else {
      softmax_cross_entropy_accumulate(*gpu, z.buffer(), labels_gpu.data_as<std::int32_t>(), rows,
                                       classes, stride, row_loss.data_as<float>(),
                                       row_correct.data_as<std::int32_t>(), t.data_as<double>(),
                                       smoothing, mix);
      softmax_cross_entropy_backward(*gpu, z.buffer(), labels_gpu.data_as<std::int32_t>(), rows,
                                     classes, stride, scale, dz, smoothing, mix);
    }
    grads.push_back(bytes_of(dz, *gpu));
    totals.push_back(bytes_of(t.buffer(), *gpu));
  }
  CHECK(totals[0] == totals[1]);
  CHECK(grads[0] == grads[1]);
  if (!padded) return;
  // The unpadded rows of the same logits: the same totals, and the padded
  // gradient is theirs in its first classes and 0 beyond.
  Tensor host_compact = Tensor::empty({rows * classes}, p, Device::cpu());
  convert_storage(*cpu, host_compact.buffer(), view_of(compact.data(), rows * classes));
  Tensor zc = Tensor::empty({rows * classes}, p, kGpu);
  zc.copy_from(host_compact);
  Tensor gc = Tensor::empty({rows * classes}, DType::f32, kGpu);
  const BufferView dzc = in_place ? zc.buffer() : gc.buffer();
  Tensor tc = Tensor::zeros({3}, DType::f64, kGpu);
  softmax_cross_entropy_accumulate_backward(*gpu, zc.buffer(), labels_gpu.data_as<std::int32_t>(),
                                            rows, classes, row_loss.data_as<float>(),
                                            row_correct.data_as<std::int32_t>(),
                                            tc.data_as<double>(), scale, dzc, smoothing, mix);
  CHECK(bytes_of(tc.buffer(), *gpu) == totals[1]);
  const std::vector<unsigned char> unpadded = bytes_of(dzc, *gpu);
  const std::size_t e = dtype_size(dzc.dtype);
  std::size_t padding_nonzero = 0, differ = 0;
  for (std::size_t r = 0; r < rows; ++r) {
    differ += std::memcmp(grads[1].data() + r * stride * e, unpadded.data() + r * classes * e,
                          classes * e) != 0;
    for (std::size_t b = (r * stride + classes) * e; b < (r + 1) * stride * e; ++b)
      padding_nonzero += grads[1][b] != 0;
  }
  CHECK(differ == 0);
  CHECK(padding_nonzero == 0);
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
