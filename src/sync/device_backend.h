// The sync layer's CUDA side, behind a backend-neutral interface: the CUDA
// build implements it in src/sync/cuda/device_backend.cpp, the CPU-only build
// in src/sync/device_backend_nocuda.cpp, where every call is a clear Error.
// Views are on a CUDA device, already checked by the caller; work is queued
// on `stream` (cudaStream_t as void*) and never waited for.
#pragma once

#include "ringtrain/core/buffer_view.h"

namespace ringtrain::sync_cuda {

void narrow_to_wire(BufferView wire, BufferView grads, float scale, void* stream);
void widen_from_wire(BufferView grads, BufferView wire, void* stream);
void copy_async(BufferView dst, BufferView src, void* stream);
void zero_async(BufferView dst, void* stream);

}  // namespace ringtrain::sync_cuda
