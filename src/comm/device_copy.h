// Byte copies between host and a communicator's memory (device memory for
// nccl). The benchmark and the GPU tests fill and check buffers through it.
// Internal to src/comm and its tests.
#pragma once

#include "ringtrain/core/buffer_view.h"

namespace ringtrain::comm_detail {

// Copies src.bytes() bytes; either side may be on a CUDA device. Synchronous.
void copy_view(BufferView dst, BufferView src);

}  // namespace ringtrain::comm_detail
