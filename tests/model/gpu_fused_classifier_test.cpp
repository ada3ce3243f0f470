// The fused classifier's kernels (one thread per narrow row, one block per wide
// row) against the two-pass kernels on the same GPU: the same row losses,
// correct flags (through the totals) and gradient bits, under fp32, bf16 and
// fp16 logits, with label smoothing, a mix's second label, ignored rows, in
// place and into an fp32 buffer, in rows of the classes or padded (the tied
// head's logits: garbage in the padding changes nothing, the gradient's
// padding is written 0, and the padded rows give the unpadded run's totals
// and gradient). The wide rows' block kernels also against themselves on
// misaligned logits (the element-wise path: the same bits), on tied maxima,
// -inf and large logits, and against the CPU. Exits 77 (ctest: skipped)
// without CUDA or a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cmath>
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

template <typename V>
std::vector<V> values_of(const BufferView& v, const ComputeContext& ctx) {
  const std::vector<unsigned char> b = bytes_of(v, ctx);
  std::vector<V> out(b.size() / sizeof(V));
  std::memcpy(out.data(), b.data(), b.size());
  return out;
}

// A buffer of storage dtype p widened to floats on the host.
std::vector<float> widened(const BufferView& v, const ComputeContext& cpu) {
  Tensor host = Tensor::empty({v.count}, v.dtype, Device::cpu());
  host.copy_from(Tensor::borrow(v.ptr, {v.count}, v.dtype, v.device));
  std::vector<float> out(v.count);
  convert_storage(cpu, view_of(out.data(), v.count), host.buffer());
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

// The wide rows' block kernels: the same logits at a 1-element offset in their
// allocation (no 16-byte access can run) give the aligned run's bits, fused or
// in two passes, as the groups and their order do not depend on the alignment;
// a maximum tied at two indices counts the lower one wherever the two lie (one
// group, two lanes of a warp, two warps, a thread's kept group and one it reads
// again); -inf and large-magnitude logits; and every row's loss, correct flag
// and gradient against the CPU's serial loop (within tolerance: another sum
// order). 70,001 classes take groups past the kept ones under 16 bits too.
TEST_CASE("gpu wide rows: the 16-byte and element-wise paths give the same bits", "[gpu][fusion]") {
  const DType p = GENERATE(DType::f32, DType::bf16, DType::f16);
  const std::size_t classes = GENERATE(50257u, 70001u);
  const float smoothing = GENERATE(0.0f, 0.1f);
  const std::size_t stride = (classes / 64 + 1) * 64;  // GPT-2's 50,304
  INFO(dtype_name(p) << ", " << classes << " classes " << stride << " apart, smoothing "
                     << smoothing);
  auto cpu = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
  auto gpu = ComputeContext::create(kGpu, Tf32Mode::off, p);
  // Tied pairs {lower, higher} (8 elements a group, 1024 threads, groups
  // t, t + 1024, ... of thread t): group 10 alone; thread 17 (group 17) and
  // thread 3 (group 1027); thread 1000 of warp 31 and thread 2 of warp 0
  // (group 1026); thread 7's groups 7 and 7 + 5 * 1024 (fp32 keeps 3); thread
  // 8's groups 8 and 8 + 7 * 1024 (past the 7 kept 16-bit ones).
  struct Tie {
    std::size_t lower, higher;
  };
  std::vector<Tie> ties{{81, 85}, {136, 8216}, {8000, 8208}, {56, 56 + 5 * 8192}};
  if (classes > 64 + 7 * 8192) ties.push_back({64, 64 + 7 * 8192});
  const std::size_t tie_rows = 2 * ties.size();
  const std::size_t rows = tie_rows + 4, n = rows * stride;
  std::vector<float> z = hashed_vector(23, n, -6.0f, 6.0f);
  std::vector<std::int32_t> labels(rows);
  for (std::size_t r = 0; r < rows; ++r)
    labels[r] = static_cast<std::int32_t>((r * 7919 + 11) % classes);
  std::vector<int> expect_correct(rows, -3);  // -3: whatever the CPU says
  for (std::size_t k = 0; k < ties.size(); ++k)
    for (std::size_t h = 0; h < 2; ++h) {
      const std::size_t r = 2 * k + h;
      z[r * stride + ties[k].lower] = z[r * stride + ties[k].higher] = 40.0f;
      labels[r] = static_cast<std::int32_t>(h == 0 ? ties[k].lower : ties[k].higher);
      expect_correct[r] = h == 0 ? 1 : 0;
    }
  // -inf beside a large logit (the row's maximum, far from the label's).
  const std::size_t r_inf = tie_rows, r_neg = tie_rows + 1, r_ignored = tie_rows + 2;
  z[r_inf * stride + 100] = z[r_inf * stride + 2000] = -INFINITY;
  z[r_inf * stride + 30000] = 30000.0f;
  labels[r_inf] = 5;
  // The label's logit large and negative.
  labels[r_neg] = 12345;
  z[r_neg * stride + 12345] = -30000.0f;
  labels[r_ignored] = -100;
  expect_correct[r_ignored] = -2;
  // Padding no pass may read.
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = classes; j < stride; ++j) z[r * stride + j] = 1000.0f;
  Tensor host = Tensor::empty({n}, p, Device::cpu());
  convert_storage(*cpu, host.buffer(), view_of(z.data(), n));
  Tensor labels_gpu = to_gpu(labels);
  const float scale = 3.0f / static_cast<float>(rows);

  struct Run {
    std::vector<float> loss;
    std::vector<std::int32_t> correct;
    std::vector<unsigned char> grad, totals;
  };
  // In place, the logits `offset` elements into their allocation.
  auto run = [&](std::size_t offset, bool fused) {
    Tensor block = Tensor::empty({n + 1}, p, kGpu);
    const BufferView zv = block.buffer().slice(offset, n);
    Tensor::borrow(zv.ptr, {n}, p, kGpu).copy_from(host);
    Tensor row_loss = Tensor::empty({rows}, DType::f32, kGpu);
    Tensor row_correct = Tensor::empty({rows}, DType::i32, kGpu);
    Tensor t = Tensor::zeros({3}, DType::f64, kGpu);
    const std::int32_t* l = labels_gpu.data_as<std::int32_t>();
    if (fused) {
      softmax_cross_entropy_accumulate_backward(
          *gpu, zv, l, rows, classes, stride, row_loss.data_as<float>(),
          row_correct.data_as<std::int32_t>(), t.data_as<double>(), scale, zv, smoothing);
    } else {
      softmax_cross_entropy_accumulate(
          *gpu, zv, l, rows, classes, stride, row_loss.data_as<float>(),
          row_correct.data_as<std::int32_t>(), t.data_as<double>(), smoothing);
      softmax_cross_entropy_backward(*gpu, zv, l, rows, classes, stride, scale, zv, smoothing);
    }
    return Run{values_of<float>(row_loss.buffer(), *gpu),
               values_of<std::int32_t>(row_correct.buffer(), *gpu), bytes_of(zv, *gpu),
               bytes_of(t.buffer(), *gpu)};
  };
  const Run aligned = run(0, true), misaligned = run(1, true), two_pass = run(1, false);
  std::size_t differ = 0;
  for (std::size_t r = 0; r < rows; ++r)
    differ += std::memcmp(&aligned.loss[r], &misaligned.loss[r], sizeof(float)) != 0 ||
              std::memcmp(&two_pass.loss[r], &misaligned.loss[r], sizeof(float)) != 0;
  CHECK(differ == 0);
  CHECK(aligned.correct == misaligned.correct);
  CHECK(two_pass.correct == misaligned.correct);
  CHECK(aligned.grad == misaligned.grad);
  CHECK(two_pass.grad == misaligned.grad);
  CHECK(aligned.totals == misaligned.totals);
  CHECK(two_pass.totals == misaligned.totals);

  // Each row against the CPU's serial loop (a row at a time, for its loss
  // and flag).
  const BufferView hz = host.buffer();
  for (std::size_t r = 0; r < rows; ++r) {
    CAPTURE(r);
    double t[3] = {0.0, 0.0, 0.0};
    softmax_cross_entropy_accumulate(*cpu, hz.slice(r * stride, stride), &labels[r], 1, classes,
                                     stride, nullptr, nullptr, t, smoothing);
    if (expect_correct[r] != -3) CHECK(aligned.correct[r] == expect_correct[r]);
    if (labels[r] == -100) continue;
    CHECK(aligned.correct[r] == static_cast<std::int32_t>(t[1]));
    if (std::isfinite(t[0]))
      CHECK(aligned.loss[r] == Approx(t[0]).epsilon(1e-5).margin(1e-5));
    else
      CHECK(static_cast<double>(aligned.loss[r]) == t[0]);
  }
  Tensor dc = Tensor::empty({n}, p, Device::cpu());
  softmax_cross_entropy_backward(*cpu, hz, labels.data(), rows, classes, stride, scale, dc.buffer(),
                                 smoothing);
  const std::vector<float> want = widened(dc.buffer(), *cpu);
  Tensor dg = Tensor::empty({n}, p, Device::cpu());
  std::memcpy(dg.data(), aligned.grad.data(), aligned.grad.size());
  const std::vector<float> got = widened(dg.buffer(), *cpu);
  // One 16-bit rounding apart at most (the exp-sum's order moves the fp32
  // value); the padding +0 exactly.
  const double tolerance = p == DType::f32 ? 1e-5 : 1e-2;
  std::size_t outside = 0, padding_nonzero = 0;
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t j = 0; j < stride; ++j) {
      const std::size_t i = r * stride + j;
      if (j >= classes)
        padding_nonzero += std::memcmp(&got[i], &want[i], sizeof(float)) != 0 || got[i] != 0.0f;
      else
        outside += std::abs(got[i] - want[i]) > tolerance * std::abs(want[i]) + 1e-7;
    }
  CHECK(outside == 0);
  CHECK(padding_nonzero == 0);
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
