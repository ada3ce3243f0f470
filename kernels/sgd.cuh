// SGD arithmetic for one element, shared by kernels/sgd.cu and the CPU loop in
// src/optim/sgd.cpp. Semantics follow PyTorch's SGD (dampening 0): weight decay
// is an L2 term added to the gradient, the momentum buffer starts at zero (so
// its first value is the gradient), and Nesterov looks ahead along the buffer.
#pragma once

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// p -= lr * (g + wd * p)
RT_HD float sgd_plain_element(float p, float g, float lr, float weight_decay) {
  return p - lr * (g + weight_decay * p);
}

// d = g + wd * p;  buf = momentum * buf + d;  p -= lr * (nesterov ? d + momentum * buf : buf)
template <bool kNesterov>
RT_HD void sgd_momentum_element(float& p, float g, float& buf, float lr, float momentum,
                                float weight_decay) {
  const float d = g + weight_decay * p;
  const float b = momentum * buf + d;
  buf = b;
  p -= lr * (kNesterov ? d + momentum * b : b);
}

}  // namespace ringtrain::kernels
