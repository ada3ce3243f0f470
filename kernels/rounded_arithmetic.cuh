// fp32 sums, differences, products and quotients each rounded on its own, on
// the host and on the device alike. nvcc fuses a product into the sum after it
// (a fused multiply-add, one rounding) wherever it can; so would GCC and Clang
// on a CPU with FMA, so the host files that share such arithmetic are built
// with -ffp-contract=off (CMakeLists.txt). Kernels whose CPU twins must give
// their bits write their arithmetic with these.
#pragma once

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

RT_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}
RT_HD float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}
RT_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}
RT_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

}  // namespace ringtrain::kernels
