// The checks every optimizer step makes before touching memory: the right
// dtype, length and device for both buffers, and a usable learning rate.
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"

namespace ringtrain {

void check_step_arguments(const char* optimizer, BufferView params, BufferView grads,
                          std::size_t param_count, Device device, float lr);
// A --no-decay mask: f32, param_count elements on the optimizer's device.
void check_decay_mask(const char* optimizer, BufferView mask, std::size_t param_count,
                      Device device);

}  // namespace ringtrain
