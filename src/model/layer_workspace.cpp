#include "model/layer_workspace.h"

#include "ringtrain/core/check.h"

namespace ringtrain {

LayerWorkspace::LayerWorkspace(const ComputeContext& ctx, std::size_t per_sample,
                               std::size_t max_batch)
    : device_(ctx.device()), per_sample_(per_sample), max_batch_(max_batch) {
  if (device_.is_cuda() && per_sample * max_batch > 0)
    data_ = Tensor::zeros({per_sample * max_batch}, DType::f32, device_);
}

float* LayerWorkspace::get(std::size_t batch, const std::string& layer) {
  const std::size_t need = per_sample_ * batch;
  if (device_.is_cuda()) {
    RT_CHECK(batch <= max_batch_, "layer '{}': batch {} is larger than the {} it was built for",
             layer, batch, max_batch_);
  } else if (data_.numel() < need) {
    data_ = Tensor::zeros({need}, DType::f32, device_);
  }
  return data_.data_as<float>();
}

}  // namespace ringtrain
