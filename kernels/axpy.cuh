// y = a*x + y, one element. Shared by kernels/axpy.cu and the CPU path.
#pragma once

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

RT_HD float axpy_element(float a, float x, float y) {
  return a * x + y;
}

}  // namespace ringtrain::kernels
