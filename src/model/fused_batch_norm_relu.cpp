#include "model/fused_batch_norm_relu.h"

#include <fmt/format.h>

namespace ringtrain {

namespace {
BufferView none_like(const BufferView& v) {
  return {nullptr, 0, v.dtype, v.device};
}
}  // namespace

FusedBatchNormRelu::FusedBatchNormRelu(BatchNormLayer& bn, bool with_residual,
                                       std::vector<std::string> folded)
    : bn_(bn), with_residual_(with_residual), folded_(std::move(folded)) {}

void FusedBatchNormRelu::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                        std::size_t batch, bool training) {
  bn_.forward_relu(xs.at(0), with_residual_ ? xs.at(1) : none_like(xs[0]), y, batch, training);
}

void FusedBatchNormRelu::backward_stored(const std::vector<BufferView>& xs, BufferView y,
                                         BufferView dy, const std::vector<BufferView>& dxs,
                                         std::size_t batch, bool accumulate) {
  // Without a residual, relu's mask comes from y computed again from x (its
  // bits, ops/batch_norm_relu.h): the passes do not read y.
  const BufferView addend = dy_addend_;
  dy_addend_ = BufferView{};
  bn_.backward_relu(xs.at(0), with_residual_ ? y : none_like(y), dy, dxs.at(0),
                    with_residual_ ? dxs.at(1) : none_like(dy), batch, accumulate, addend);
}

std::string FusedBatchNormRelu::describe_kernels() const {
  return fmt::format("fused {}", fmt::join(folded_, "+"));
}

}  // namespace ringtrain
