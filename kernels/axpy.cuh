// y = a*x + y, one element. Shared by kernels/axpy.cu and the CPU path.
#pragma once

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// The product rounded on its own on the GPU too: nvcc would contract it into
// a fused multiply-add, one rounding where the CPU has two, and the stored
// layers' sums (sum_two_kernel) are compared with the CPU's word for word.
RT_HD float axpy_element(float a, float x, float y) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(a, x), y);
#else
  return a * x + y;
#endif
}

}  // namespace ringtrain::kernels
