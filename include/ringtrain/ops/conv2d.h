// 2-D convolution over NCHW float tensors, planned once for a maximum batch.
// CPU: oneDNN's convolutions (where the build has them), else im2col +
// cblas_sgemm per sample (1x1 stride-1 unpadded convs skip im2col). GPU: cuDNN, with algorithms and
// workspace chosen at plan time. Activations may be channels-last (NHWC,
// Conv2dGeometry::layout); the weight is [out, in, kh, kw] in either layout.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/tensor/layout.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

struct Conv2dGeometry {
  static constexpr std::size_t kSquare = static_cast<std::size_t>(-1);
  std::size_t in_channels = 0, height = 0, width = 0;
  // kernel, stride, padding: along the height, and along the width too unless
  // the *_w fields say otherwise (Inception's 1x7 and 7x1 kernels).
  std::size_t out_channels = 0, kernel = 0, stride = 1, padding = 0;
  std::size_t kernel_w = kSquare, stride_w = kSquare, padding_w = kSquare;
  Layout layout = Layout::nchw;  // of x, y and their gradients

  std::size_t kh() const { return kernel; }
  std::size_t kw() const { return kernel_w == kSquare ? kernel : kernel_w; }
  std::size_t sh() const { return stride; }
  std::size_t sw() const { return stride_w == kSquare ? stride : stride_w; }
  std::size_t ph() const { return padding; }
  std::size_t pw() const { return padding_w == kSquare ? padding : padding_w; }
  std::size_t out_height() const { return (height + 2 * ph() - kh()) / sh() + 1; }
  std::size_t out_width() const { return (width + 2 * pw() - kw()) / sw() + 1; }
  // Validates (kernel fits the padded input, stride >= 1, ...); Error otherwise.
  void validate() const;
};

namespace detail {
class GpuConvPlan;
class CpuConvPlan;
}  // namespace detail

class Conv2dOp {
 public:
  Conv2dOp(const ComputeContext& ctx, const Conv2dGeometry& geometry, std::size_t max_batch);
  ~Conv2dOp();
  Conv2dOp(const Conv2dOp&) = delete;
  Conv2dOp& operator=(const Conv2dOp&) = delete;

  const Conv2dGeometry& geometry() const { return g_; }
  // y = conv(x, w) + b; w is [out, in, k, k], b is [out] or null (no bias).
  void forward(const float* x, const float* w, const float* b, float* y, std::size_t batch);
  // dw, db (if not null) are overwritten, or added to when accumulate; dx (if
  // not null) is overwritten.
  void backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db,
                std::size_t batch, bool accumulate);
  // The stored forms: on a GPU under bf16/fp16 where cuDNN
  // has 16-bit forward and backward-data algorithms for the shape
  // (stores_activations), x, y and dy are views of the context's 16-bit dtype
  // that cuDNN reads and writes with no cast, dx of it or f32; the weight
  // gradient runs on them through cuDNN's graph API where it has an engine,
  // else widens x and dy into the context's fp32 scratch; a bias (b, db: null for none) is added to
  // cuDNN's 16-bit y in fp32 and rounded again, as the fp32 forms round.
  // Elsewhere the fp32 forms run.
  bool stores_activations() const;
  void forward(BufferView x, const float* w, const float* b, BufferView y, std::size_t batch);
  void backward(BufferView x, const float* w, BufferView dy, BufferView dx, float* dw, float* db,
                std::size_t batch, bool accumulate);
  // Which kernels run it, as one line: on a GPU the cuDNN algorithms chosen
  // (forward, backward filter, backward data; the 16-bit ones under
  // --precision bf16|fp16), their math type and workspace; on the CPU the path
  // ("onednn", "im2col+gemm", "gemm (1x1, no im2col)").
  std::string describe() const;

 private:
  const ComputeContext& ctx_;
  Conv2dGeometry g_;
  std::size_t max_batch_;
  bool direct_;  // 1x1, stride 1, no padding: the input is its own im2col
  Tensor col_;   // CPU: [C*k*k, Ho*Wo] for one sample
  // CPU im2col path in NHWC: one sample's input and output in NCHW, which
  // the im2col + GEMM computes in.
  Tensor sample_in_, sample_out_;
  std::unique_ptr<detail::GpuConvPlan> gpu_;
  std::unique_ptr<detail::CpuConvPlan> cpu_;  // oneDNN, when the build has it
};

}  // namespace ringtrain
