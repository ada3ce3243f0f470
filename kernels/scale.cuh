// x * factor, one element: gradient scaling and clipping, on GPU (kernels/scale.cu)
// and CPU (src/optim/grad_clip.cpp).
#pragma once

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

RT_HD float scale_element(float x, float factor) {
  return x * factor;
}

}  // namespace ringtrain::kernels
