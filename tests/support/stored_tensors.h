// Values to and from a tensor of a storage dtype (fp32, bf16, fp16) on any
// device, through the host's exact conversions: what the GPU tests of the
// stored (16-bit) ops share.
#pragma once

#include <algorithm>
#include <vector>

#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain::test {

// v narrowed to p (rounded to nearest even; exact for values on p's grid) and
// stored on `device` (an f32 tensor for fp32).
inline Tensor stored(const std::vector<float>& v, DType p, Device device,
                     const ComputeContext& cpu) {
  Tensor narrow = Tensor::empty({v.size()}, p, Device::cpu());
  convert_storage(cpu, narrow.buffer(), view_of(v.data(), v.size()));
  Tensor out = Tensor::empty({v.size()}, p, device);
  out.copy_from(narrow);
  return out;
}

// t's values widened to fp32 on the host (exact), after ctx's work.
inline std::vector<float> widened(const Tensor& t, const ComputeContext& ctx,
                                  const ComputeContext& cpu) {
  ctx.synchronize();
  Tensor host = Tensor::empty({t.numel()}, t.dtype(), Device::cpu());
  host.copy_from(t);
  Tensor wide = Tensor::empty({t.numel()}, DType::f32, Device::cpu());
  convert_storage(cpu, wide.buffer(), host.buffer());
  const float* w = wide.data_as<float>();
  return std::vector<float>(w, w + t.numel());
}

}  // namespace ringtrain::test
