// Linear: y = x W^T + b with W [out, in] (PyTorch's layout, so weights move
// between the two unchanged). A [rows, in] input ([T, C] in a transformer)
// applies it to each row.
#include "model/linear_layer.h"

#include <fmt/format.h>

#include "ringtrain/core/check.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/ops/gemm.h"
#include "ringtrain/ops/linear_gelu.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/device_memory.h"

namespace ringtrain {

LinearLayer::LinearLayer(std::string name, const Shape& input, std::size_t out,
                         const ComputeContext& ctx)
    : Layer(std::move(name), input, input.rank() == 2 ? Shape{input[0], out} : Shape{out}),
      ctx_(ctx),
      rows_(input.rank() == 2 ? input[0] : 1),
      in_(input.rank() == 2 ? input[1] : input.numel()),
      out_(out) {
  if (stores_activations()) w16_ = Tensor::empty({out_ * in_}, ctx_.precision(), ctx_.device());
}

std::vector<ParamDesc> LinearLayer::param_descs() const {
  return {{"weight", Shape{out_, in_}, in_}, {"bias", Shape{out_}, 0}};
}

void LinearLayer::bind(float* params, float* grads) {
  w_ = params;
  b_ = params + out_ * in_;
  dw_ = grads;
  db_ = grads + out_ * in_;
}

// Under --precision bf16|fp16 the model stores x, dy and the weights this
// layer reads on the 16-bit grid, so all three products may run on 16-bit
// copies (tensor cores on a GPU; gemm.h).
void LinearLayer::forward(const float* x, float* y, std::size_t samples, bool) {
  const std::size_t batch = samples * rows_;
  gemm(ctx_, false, true, batch, out_, in_, 1.0f, x, in_, w_, in_, 0.0f, y, out_, ctx_.precision());
  bias_add(ctx_, y, b_, batch, out_, 1);
}

void LinearLayer::backward(const float* x, const float*, const float* dy, float* dx,
                           std::size_t samples, bool accumulate) {
  const std::size_t batch = samples * rows_;
  if (batch == 0) {
    if (!accumulate) device_zero(dw_, sizeof(float) * (out_ * in_ + out_), ctx_.device());
    return;
  }
  if (!bias_grad_written_) bias_grad(ctx_, dy, db_, batch, out_, 1, accumulate);
  // dW = dy^T x
  gemm(ctx_, true, false, out_, in_, batch, 1.0f, dy, out_, x, in_, accumulate ? 1.0f : 0.0f, dw_,
       in_, ctx_.precision());
  // dx = dy W
  if (dx != nullptr)
    gemm(ctx_, false, false, batch, in_, out_, 1.0f, dy, out_, w_, in_, 0.0f, dx, in_,
         ctx_.precision());
}

std::string LinearLayer::describe_kernels() const {
  if (!stores_activations()) return {};
  const std::string_view p = dtype_name(ctx_.precision());
  std::string s = fmt::format(
      "cublasLt bias epilogue: {0} y = x Wᵀ + b; dW with the bias-gradient epilogue (BGRADB); "
      "dx in {0} (fp32 where summed)",
      p);
  if (const std::size_t apart = gemm_stored_bias_apart(ctx_); apart > 0)
    s += fmt::format(
        "; cuBLASLt refused the fp32 bias epilogue with a {} output for {} shape(s) of this "
        "context: fp32 product, bias added apart",
        p, apart);
  if (const std::size_t apart = gemm_stored_sums_apart(ctx_); apart > 0)
    s += fmt::format(
        "; cuBLASLt refused the bias-gradient epilogue for {} shape(s): bias gradient reduced "
        "apart",
        apart);
  return s;
}

void LinearLayer::forward_stored(const std::vector<BufferView>& xs, BufferView y,
                                 std::size_t samples, bool) {
  // W is on the grid (the model's compute copy): narrowing it is exact.
  convert_storage(ctx_, w16_.buffer(), view_of(w_, out_ * in_, ctx_.device()));
  w16_fresh_ = true;
  linear_forward_stored(ctx_, xs.at(0), w16_.buffer(), b_, y, samples * rows_, in_, out_);
}

bool LinearLayer::forward_stored_gelu(BufferView x, BufferView pre, BufferView y,
                                      std::size_t samples) {
  convert_storage(ctx_, w16_.buffer(), view_of(w_, out_ * in_, ctx_.device()));
  w16_fresh_ = true;
  const std::size_t rows = samples * rows_;
  if (linear_gelu_forward_stored(ctx_, x, w16_.buffer(), b_, pre, y, rows, in_, out_)) return true;
  linear_forward_stored(ctx_, x, w16_.buffer(), b_, pre, rows, in_, out_);
  return false;
}

void LinearLayer::backward_stored(const std::vector<BufferView>& xs, BufferView, BufferView dy,
                                  const std::vector<BufferView>& dxs, std::size_t samples,
                                  bool accumulate) {
  RT_CHECK(w16_fresh_, "layer '{}': a stored backward without a stored forward before it", name());
  linear_backward_stored(ctx_, xs.at(0), w16_.buffer(), dy, dxs.at(0), dw_,
                         bias_grad_written_ ? nullptr : db_, samples * rows_, in_, out_,
                         accumulate);
}

LinearDgeluRan LinearLayer::backward_stored_dgelu(BufferView x, BufferView dy, BufferView pre,
                                                  BufferView d_pre, BufferView d_gelu,
                                                  float* pre_db, std::size_t samples,
                                                  bool accumulate) {
  RT_CHECK(w16_fresh_, "layer '{}': a stored backward without a stored forward before it", name());
  const std::size_t rows = samples * rows_;
  // dW and db first, as backward_stored (no dx): they read dy alone.
  linear_backward_stored(ctx_, x, w16_.buffer(), dy, BufferView{nullptr, 0, dy.dtype, dy.device},
                         dw_, bias_grad_written_ ? nullptr : db_, rows, in_, out_, accumulate);
  const LinearDgeluRan ran = linear_dgelu_backward_stored(ctx_, dy, w16_.buffer(), pre, d_pre,
                                                          pre_db, rows, in_, out_, accumulate);
  if (ran == LinearDgeluRan::refused)
    gemm_stored_epilogue(ctx_, false, false, rows, in_, out_, dy, out_, w16_.buffer(), in_, 0.0f,
                         d_gelu, in_);
  return ran;
}

}  // namespace ringtrain
