// The sync layer's CUDA side (host code): wire casts and stream-ordered
// copies for --grad-dtype and ZeRO-1, queued on the caller's stream.
#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/wire_cast.h"
#include "sync/device_backend.h"

namespace ringtrain::sync_cuda {

void narrow_to_wire(BufferView wire, BufferView grads, float scale, void* stream) {
  kernels::narrow_to_wire_cuda(grads.as<const float>(), wire.as<std::uint16_t>(), grads.count,
                               scale, wire.dtype == DType::bf16, stream);
}

void widen_from_wire(BufferView grads, BufferView wire, void* stream) {
  kernels::widen_from_wire_cuda(wire.as<const std::uint16_t>(), grads.as<float>(), grads.count,
                                wire.dtype == DType::bf16, stream);
}

void copy_async(BufferView dst, BufferView src, void* stream) {
  if (src.count == 0) return;
  RT_CUDA_CHECK(cudaMemcpyAsync(dst.ptr, src.ptr, src.bytes(), cudaMemcpyDefault,
                                static_cast<cudaStream_t>(stream)));
}

void zero_async(BufferView dst, void* stream) {
  if (dst.count == 0) return;
  RT_CUDA_CHECK(cudaMemsetAsync(dst.ptr, 0, dst.bytes(), static_cast<cudaStream_t>(stream)));
}

}  // namespace ringtrain::sync_cuda
