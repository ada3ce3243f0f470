// Writes ringtrain's softmax cross-entropy over rows of a padded vocabulary
// (the tied head's logits under bf16/fp16) as JSON, for padded_loss_torch.py
// to compare with PyTorch in float64: per case (storage dtype, label
// smoothing, a mix's lam, fused or two passes, the padding's garbage) the
// true columns of the stored logits widened, the loss sum, the correct and
// counted rows, and the whole padded gradient (backward's scale 1 / rows).
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <vector>

#include "kernels/storage.cuh"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {
std::vector<float> widened(const Tensor& t) {
  std::vector<float> out(t.buffer().count);
  kernels::with_storage(t.buffer().dtype, [&](auto s) {
    using T = decltype(s);
    for (std::size_t i = 0; i < out.size(); ++i)
      out[i] = kernels::load(static_cast<const T*>(t.data()), i);
  });
  return out;
}
}  // namespace

int main() {
  const std::size_t rows = 7, classes = 75, stride = 128;
  std::vector<float> z = test::hashed_vector(83, rows * classes, -5.0f, 5.0f);
  z[3 * classes + 11] = 25.0f;  // a dominant logit, at row 3's labels: one row correct
  const std::vector<std::int32_t> a = {3, 74, -100, 11, 0, 40, 62}, b = {9, 1, 5, 11, 70, 2, 33};
  const float scale = 1.0f / static_cast<float>(rows);
  nlohmann::json cases = nlohmann::json::array();
  for (const DType p : {DType::f32, DType::bf16, DType::f16})
    for (const float e : {0.0f, 0.1f})
      for (const float lam : {1.0f, 0.7f, 0.3f})
        for (const bool fused : {false, true})
          for (const float garbage : {1.0e4f, std::numeric_limits<float>::quiet_NaN()}) {
            const auto ctx = ComputeContext::create(Device::cpu(), Tf32Mode::off, p);
            std::vector<float> padded(rows * stride, garbage);
            for (std::size_t r = 0; r < rows; ++r)
              for (std::size_t j = 0; j < classes; ++j) padded[r * stride + j] = z[r * classes + j];
            Tensor logits = Tensor::empty({rows * stride}, p, Device::cpu());
            convert_storage(*ctx, logits.buffer(), view_of(padded.data(), padded.size()));
            std::vector<float> stored;  // the true columns, as stored, widened
            for (std::size_t i = 0; const float v : widened(logits))
              if (i++ % stride < classes) stored.push_back(v);
            const LabelMix mix = lam == 1.0f ? LabelMix{} : LabelMix{b.data(), lam};
            double totals[3] = {0, 0, 0};
            const SoftmaxCrossEntropyResult eval = softmax_cross_entropy_forward(
                *ctx, logits.buffer(), a.data(), rows, classes, stride, nullptr, nullptr);
            // The gradient over the logits in place (the model's): its
            // padding must come out 0 over the garbage.
            if (fused) {
              softmax_cross_entropy_accumulate_backward(*ctx, logits.buffer(), a.data(), rows,
                                                        classes, stride, nullptr, nullptr, totals,
                                                        scale, logits.buffer(), e, mix);
            } else {
              softmax_cross_entropy_accumulate(*ctx, logits.buffer(), a.data(), rows, classes,
                                               stride, nullptr, nullptr, totals, e, mix);
              softmax_cross_entropy_backward(*ctx, logits.buffer(), a.data(), rows, classes, stride,
                                             scale, logits.buffer(), e, mix);
            }
            cases.push_back({{"dtype", dtype_name(p)},
                             {"smoothing", e},
                             {"lam", lam},
                             {"fused", fused},
                             {"garbage", std::isnan(garbage) ? "nan" : "1e4"},
                             {"logits", stored},
                             {"loss_sum", totals[0]},
                             {"correct", totals[1]},
                             {"eval_loss_sum", eval.loss_sum},
                             {"eval_correct", eval.correct},
                             {"eval_counted", eval.counted},
                             {"grad", widened(logits)}});
          }
  std::cout << nlohmann::json{{"rows", rows}, {"classes", classes}, {"stride", stride},
                              {"labels", a},  {"second", b},        {"cases", cases}}
            << "\n";
  return 0;
}
