// The squared L2 norm's per-element term, in double: float squares summed in
// float lose digits long before a million-element gradient is covered. Shared by
// kernels/grad_norm.cu and the CPU sum in src/optim/grad_clip.cpp.
#pragma once

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

RT_HD double squared_as_double(float x) {
  const double d = static_cast<double>(x);
  return d * d;
}

}  // namespace ringtrain::kernels
