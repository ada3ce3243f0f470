#include "model/fused_conv_relu.h"

#include <fmt/format.h>

namespace ringtrain {

FusedConvRelu::FusedConvRelu(Conv2dLayer& conv, std::vector<std::string> folded,
                             std::shared_ptr<LayerWorkspace> workspace)
    : conv_(conv), folded_(std::move(folded)), workspace_(std::move(workspace)) {}

void FusedConvRelu::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                   std::size_t batch, bool) {
  conv_.forward_relu(xs.at(0), y, batch, workspace_->get(batch, folded_.back()));
}

void FusedConvRelu::backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                                    const std::vector<BufferView>& dxs, std::size_t batch,
                                    bool accumulate) {
  conv_.backward_relu(xs.at(0), y, dy, dxs.at(0), batch, accumulate,
                      workspace_->get(batch, folded_.back()));
}

std::string FusedConvRelu::describe_kernels() const {
  return fmt::format("fused {}: {}", fmt::join(folded_, "+"), conv_.describe_kernels());
}

}  // namespace ringtrain
