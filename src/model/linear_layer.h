#pragma once

#include "model/layer.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/linear_dgelu.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

class LinearLayer final : public Layer,
                          public DescribesKernels,
                          public StoresActivations,
                          public IgnoresOutputInBackward {
 public:
  LinearLayer(std::string name, const Shape& input, std::size_t out, const ComputeContext& ctx);
  bool matmul_weights() const override { return true; }
  std::vector<ParamDesc> param_descs() const override;
  void bind(float* params, float* grads) override;
  void forward(const float* x, float* y, std::size_t batch, bool training) override;
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override;
  // Stored on a GPU under bf16/fp16 (cuBLASLt on the 16-bit buffers); the CPU's
  // products run in fp32 through the model's adapter.
  bool stores_activations() const override {
    return ctx_.is_cuda() && ctx_.precision() != DType::f32;
  }
  // The stored path's cuBLASLt products (bench step --layers); empty elsewhere.
  std::string describe_kernels() const override;
  void forward_stored(const std::vector<BufferView>& xs, BufferView y, std::size_t batch,
                      bool training) override;
  void backward_stored(const std::vector<BufferView>& xs, BufferView y, BufferView dy,
                       const std::vector<BufferView>& dxs, std::size_t batch,
                       bool accumulate) override;
  // The stored forward of this layer and the gelu_tanh after it in one
  // cuBLASLt GEMM (ops/linear_gelu.h; model/fused_linear_gelu.h): pre as
  // forward_stored writes y, and y = gelu_tanh of the fp32 pre-activation.
  // Returns false where cuBLASLt refused the GELU epilogue for the shape:
  // then pre alone is written (forward_stored's numbers) and the caller
  // applies gelu.
  bool forward_stored_gelu(BufferView x, BufferView pre, BufferView y, std::size_t batch);
  // The stored backward of this layer where its input is a gelu_tanh's
  // output whose pre-activation `pre` the layer before stored
  // (model/fused_linear_dgelu.h): dW and db as backward_stored, and dx
  // through cuBLASLt's DGELU epilogue (ops/linear_dgelu.h) into d_pre, the
  // gelu's input gradient, with that layer's bias gradient pre_db. Where
  // cuBLASLt refused it, dx is written into d_gelu (backward_stored's) and
  // gelu's own backward is the caller's.
  LinearDgeluRan backward_stored_dgelu(BufferView x, BufferView dy, BufferView pre,
                                       BufferView d_pre, BufferView d_gelu, float* pre_db,
                                       std::size_t batch, bool accumulate);
  // The bias gradient this layer's backward writes (bound; null before).
  float* bias_gradient() const { return db_; }
  // Its next backwards leave the bias gradient alone (a reader's epilogue
  // wrote it: model/fused_linear_dgelu.h), or compute it (false, the default).
  void set_bias_gradient_written(bool written) { bias_grad_written_ = written; }

 private:
  const ComputeContext& ctx_;
  std::size_t rows_, in_, out_;  // rows per sample: 1, or T of a [T, in] input
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
  // The stored path's 16-bit copy of W, made by each forward (one narrowing
  // pass) and read by its backward, so that no product casts W per call.
  Tensor w16_;
  bool w16_fresh_ = false;
  bool bias_grad_written_ = false;
};

}  // namespace ringtrain
