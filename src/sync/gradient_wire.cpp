#include "ringtrain/sync/gradient_wire.h"

#include <cstdint>
#include <cstring>

#include "kernels/wire_cast.cuh"
#include "ringtrain/core/check.h"
#include "sync/device_backend.h"

namespace ringtrain {

namespace {

void check_pair(BufferView wire, BufferView grads, const char* what) {
  RT_CHECK(grads.dtype == DType::f32, "{}: the gradients must be f32, got {}", what,
           dtype_name(grads.dtype));
  RT_CHECK(wire.dtype == DType::bf16 || wire.dtype == DType::f16,
           "{}: the wire dtype must be bf16 or f16, got {}", what, dtype_name(wire.dtype));
  RT_CHECK(wire.count == grads.count && wire.device == grads.device,
           "{}: {} wire elements on {} for {} gradients on {}", what, wire.count,
           device_name(wire.device), grads.count, device_name(grads.device));
}

}  // namespace

DType parse_grad_dtype(std::string_view name) {
  if (name == "fp32") return DType::f32;
  if (name == "bf16") return DType::bf16;
  if (name == "fp16") return DType::f16;
  RT_CHECK(false, "--grad-dtype '{}': expected fp32, bf16 or fp16", name);
  return DType::f32;
}

std::string_view grad_dtype_name(DType wire) {
  switch (wire) {
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "fp16";
    default:
      return "fp32";
  }
}

WireReduction wire_reduction(DType wire, ReduceOp op, int world) {
  if (wire == DType::f32) return {op, 1.f};
  return {ReduceOp::sum, op == ReduceOp::avg ? 1.f / static_cast<float>(world) : 1.f};
}

void narrow_to_wire(BufferView wire, BufferView grads, float scale, void* stream) {
  check_pair(wire, grads, "narrow_to_wire");
  if (grads.device.is_cuda()) return sync_cuda::narrow_to_wire(wire, grads, scale, stream);
  const bool bf16 = wire.dtype == DType::bf16;
  const float* __restrict g = grads.as<const float>();
  std::uint16_t* __restrict w = wire.as<std::uint16_t>();
  for (std::size_t i = 0; i < grads.count; ++i) w[i] = kernels::narrow_to_wire(g[i], scale, bf16);
}

void widen_from_wire(BufferView grads, BufferView wire, void* stream) {
  check_pair(wire, grads, "widen_from_wire");
  if (grads.device.is_cuda()) return sync_cuda::widen_from_wire(grads, wire, stream);
  const bool bf16 = wire.dtype == DType::bf16;
  const std::uint16_t* __restrict w = wire.as<const std::uint16_t>();
  float* __restrict g = grads.as<float>();
  for (std::size_t i = 0; i < grads.count; ++i) g[i] = kernels::widen_from_wire(w[i], bf16);
}

void copy_on_stream(BufferView dst, BufferView src, void* stream) {
  RT_CHECK(dst.dtype == src.dtype && dst.count == src.count,
           "copy_on_stream: {} {} elements into {} {}", src.count, dtype_name(src.dtype), dst.count,
           dtype_name(dst.dtype));
  if (dst.device.is_cuda() || src.device.is_cuda()) return sync_cuda::copy_async(dst, src, stream);
  if (src.count > 0 && dst.ptr != src.ptr) std::memmove(dst.ptr, src.ptr, src.bytes());
}

void zero_on_stream(BufferView dst, void* stream) {
  if (dst.device.is_cuda()) return sync_cuda::zero_async(dst, stream);
  if (dst.count > 0) std::memset(dst.ptr, 0, dst.bytes());
}

}  // namespace ringtrain
