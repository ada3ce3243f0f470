#include "ringtrain/ops/max_pool2d.h"

#include <cstring>

#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

void MaxPool2dGeometry::validate() const {
  RT_CHECK(channels > 0 && height > 0 && width > 0,
           "max_pool2d input must be non-empty, got {}x{}x{}", channels, height, width);
  RT_CHECK(kernel > 0 && stride > 0, "max_pool2d kernel ({}) and stride ({}) must be at least 1",
           kernel, stride);
  RT_CHECK(kernel <= height && kernel <= width, "max_pool2d kernel {} does not fit the input {}x{}",
           kernel, height, width);
}

MaxPool2dOp::MaxPool2dOp(const ComputeContext& ctx, const MaxPool2dGeometry& geometry,
                         std::size_t max_batch)
    : ctx_(ctx), g_(geometry), max_batch_(max_batch) {
  g_.validate();
  if (ctx.is_cuda())
    gpu_ = detail::make_gpu_pool_plan(detail::handles_of(ctx), g_);
  else
    argmax_ = Tensor::empty({max_batch * g_.channels * g_.out_height() * g_.out_width()},
                            DType::i32, Device::cpu());
}

MaxPool2dOp::~MaxPool2dOp() = default;

void MaxPool2dOp::forward(const float* x, float* y, std::size_t batch) {
  RT_CHECK(batch <= max_batch_, "max_pool2d batch {} exceeds the planned maximum {}", batch,
           max_batch_);
  if (batch == 0) return;
  if (gpu_) return gpu_->forward(x, y, batch);
  const std::size_t H = g_.height, W = g_.width, Ho = g_.out_height(), Wo = g_.out_width();
  const std::size_t k = g_.kernel, s = g_.stride;
  std::int32_t* arg = argmax_.data_as<std::int32_t>();
  for (std::size_t plane = 0; plane < batch * g_.channels; ++plane) {
    const float* in = x + plane * H * W;
    float* out = y + plane * Ho * Wo;
    std::int32_t* a = arg + plane * Ho * Wo;
    for (std::size_t oh = 0; oh < Ho; ++oh) {
      for (std::size_t ow = 0; ow < Wo; ++ow) {
        std::size_t best_at = oh * s * W + ow * s;
        float best = in[best_at];
        for (std::size_t ki = 0; ki < k; ++ki) {
          const std::size_t row = (oh * s + ki) * W + ow * s;
          for (std::size_t kj = 0; kj < k; ++kj)
            if (in[row + kj] > best) {
              best = in[row + kj];
              best_at = row + kj;
            }
        }
        out[oh * Wo + ow] = best;
        a[oh * Wo + ow] = static_cast<std::int32_t>(best_at);
      }
    }
  }
}

void MaxPool2dOp::backward(const float* x, const float* y, const float* dy, float* dx,
                           std::size_t batch) {
  RT_CHECK(batch <= max_batch_, "max_pool2d batch {} exceeds the planned maximum {}", batch,
           max_batch_);
  if (batch == 0) return;
  if (gpu_) return gpu_->backward(x, y, dy, dx, batch);
  // The argmax of the matching forward routes each output gradient to its input.
  const std::size_t in_plane = g_.height * g_.width, out_plane = g_.out_height() * g_.out_width();
  std::memset(dx, 0, sizeof(float) * batch * g_.channels * in_plane);
  const std::int32_t* arg = argmax_.data_as<std::int32_t>();
  for (std::size_t plane = 0; plane < batch * g_.channels; ++plane) {
    float* d = dx + plane * in_plane;
    const float* g = dy + plane * out_plane;
    const std::int32_t* a = arg + plane * out_plane;
    for (std::size_t i = 0; i < out_plane; ++i) d[a[i]] += g[i];
  }
}

}  // namespace ringtrain
