// The checks every optimizer step makes before touching memory: the right
// dtype, length and device for both buffers, and a usable learning rate.
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"

namespace ringtrain {

void check_step_arguments(const char* optimizer, BufferView params, BufferView grads,
                          std::size_t param_count, Device device, float lr);

}  // namespace ringtrain
