#pragma once

#include "model/layer.h"
#include "ringtrain/ops/compute_context.h"
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

 private:
  const ComputeContext& ctx_;
  std::size_t rows_, in_, out_;  // rows per sample: 1, or T of a [T, in] input
  float *w_ = nullptr, *b_ = nullptr, *dw_ = nullptr, *db_ = nullptr;
  // The stored path's 16-bit copy of W, made by each forward (one narrowing
  // pass) and read by its backward, so that no product casts W per call.
  Tensor w16_;
  bool w16_fresh_ = false;
};

}  // namespace ringtrain
