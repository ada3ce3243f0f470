// The CPU-only build's answer to the sync layer's CUDA side: every call names
// what was asked for and why it cannot run.
#include "ringtrain/core/check.h"
#include "sync/device_backend.h"

namespace ringtrain::sync_cuda {

namespace {
[[noreturn]] void no_cuda(const char* what, Device device) {
  RT_CHECK(false, "{} on {} was requested, but this ringtrain was built without CUDA", what,
           device_name(device));
  __builtin_unreachable();
}
}  // namespace

void narrow_to_wire(BufferView wire, BufferView, float, void*) {
  no_cuda("narrowing gradients to the wire dtype", wire.device);
}
void widen_from_wire(BufferView grads, BufferView, void*) {
  no_cuda("widening gradients from the wire dtype", grads.device);
}
void copy_async(BufferView dst, BufferView, void*) {
  no_cuda("a device copy", dst.device);
}
void zero_async(BufferView dst, void*) {
  no_cuda("a device fill", dst.device);
}

}  // namespace ringtrain::sync_cuda
