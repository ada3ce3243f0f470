// A CPU convolution backend behind Conv2dOp: oneDNN's convolution primitives
// (Debian's libdnnl, the library PyTorch's CPU path runs its convolutions on)
// when this build has it, else none and Conv2dOp's own im2col + GEMM.
// RINGTRAIN_CPU_CONV=im2col chooses the latter at run time (for comparisons).
#pragma once

#include <cstddef>
#include <memory>

#include "ringtrain/ops/conv2d.h"

namespace ringtrain::detail {

class CpuConvPlan {
 public:
  virtual ~CpuConvPlan() = default;
  // y = conv(x, w), no bias; x and y in the geometry's layout, w [out, in, kh, kw].
  virtual void forward(const float* x, const float* w, float* y, std::size_t batch) = 0;
  // dw = (or += when accumulate) the weight gradient.
  virtual void backward_weights(const float* x, const float* dy, float* dw, std::size_t batch,
                                bool accumulate) = 0;
  // dx = the input gradient (overwritten).
  virtual void backward_data(const float* w, const float* dy, float* dx, std::size_t batch) = 0;
};

// nullptr: no library backend (a build without oneDNN, or RINGTRAIN_CPU_CONV=im2col).
std::unique_ptr<CpuConvPlan> make_cpu_conv_plan(const Conv2dGeometry& g, std::size_t max_batch);

// "onednn" or "im2col": what make_cpu_conv_plan gives in this process.
const char* cpu_conv_backend_name();

}  // namespace ringtrain::detail
