#include "model/fused_residual_layer_norm.h"

#include <fmt/format.h>

namespace ringtrain {

FusedResidualLayerNorm::FusedResidualLayerNorm(LayerNormLayer& ln, float scale,
                                               std::vector<std::string> folded)
    : ln_(ln), scale_(scale), folded_(std::move(folded)) {}

void FusedResidualLayerNorm::forward(const std::vector<BufferView>& xs, BufferView sum,
                                     BufferView y, std::size_t batch) {
  ln_.forward_residual(xs.at(0), xs.at(1), scale_, sum, y, batch);
}

void FusedResidualLayerNorm::backward(BufferView sum, BufferView dy, BufferView d_sum, bool summed,
                                      const std::vector<BufferView>& dxs, std::size_t batch,
                                      bool accumulate) {
  ln_.backward_residual(sum, dy, d_sum, summed, scale_, dxs.at(0), dxs.at(1), batch, accumulate);
}

std::string FusedResidualLayerNorm::describe_kernels() const {
  return fmt::format("fused {}", fmt::join(folded_, "+"));
}

}  // namespace ringtrain
