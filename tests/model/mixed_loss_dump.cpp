// Writes ringtrain's mixed-target softmax cross-entropy (mixup / cutmix) as
// JSON, for mixed_loss_torch.py to compare with PyTorch's cross_entropy on
// soft targets: per case (lam, label smoothing) the logits, both label
// columns, the mean loss and its gradient (backward with grad_scale 1).
#include <cstdint>
#include <iostream>
#include <nlohmann/json.hpp>
#include <vector>

#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/softmax_cross_entropy.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

int main() {
  auto ctx = ComputeContext::create(Device::cpu());
  const std::size_t rows = 6, classes = 10;
  std::vector<float> z = test::hashed_vector(71, rows * classes, -4.0f, 4.0f);
  z[13] = 30.0f;  // a dominant logit
  const std::vector<std::int32_t> a = {7, 0, 3, 9, 3, 1}, b = {2, 3, 8, 4, 5, 6};
  nlohmann::json cases = nlohmann::json::array();
  for (float e : {0.0f, 0.1f, 0.3f})
    for (float lam : {1.0f, 0.9f, 0.5f, 0.37f, 0.0f}) {
      double totals[3] = {0, 0, 0};
      const LabelMix mix{b.data(), lam};
      softmax_cross_entropy_accumulate(*ctx, z.data(), a.data(), rows, classes, nullptr, nullptr,
                                       totals, e, mix);
      std::vector<float> dz(rows * classes);
      softmax_cross_entropy_backward(*ctx, z.data(), a.data(), rows, classes,
                                     1.0f / static_cast<float>(rows), dz.data(), e, mix);
      cases.push_back({{"lam", lam},
                       {"smoothing", e},
                       {"loss", totals[0] / static_cast<double>(rows)},
                       {"correct", totals[1]},
                       {"grad", dz}});
    }
  std::cout << nlohmann::json{{"rows", rows}, {"classes", classes}, {"logits", z},
                              {"labels", a},  {"second", b},        {"cases", cases}}
            << "\n";
  return 0;
}
