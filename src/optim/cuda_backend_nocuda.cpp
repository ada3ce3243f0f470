// The CPU-only build's answer to the optim layer's CUDA side: every call names
// what was asked for and why it cannot run.
#include "optim/cuda_backend.h"
#include "ringtrain/core/check.h"

namespace ringtrain::optim_cuda {

namespace {
[[noreturn]] void no_cuda(const char* what, int ordinal) {
  RT_CHECK(false, "{} on cuda:{} was requested, but this ringtrain was built without CUDA", what,
           ordinal);
  __builtin_unreachable();
}
}  // namespace

float* alloc_zeroed_f32(std::size_t, int ordinal) {
  no_cuda("optimizer state allocation", ordinal);
}
void free_f32(float*, int) noexcept {}
void copy_to_device(BufferView dst, const float*) {
  no_cuda("a host-to-device copy", dst.device.index);
}
void copy_to_host(float*, BufferView src) {
  no_cuda("a device-to-host copy", src.device.index);
}
void sgd_step(BufferView params, BufferView, float*, float, float, float, bool, const float*,
              const kernels::NonfiniteGuardState*, void*) {
  no_cuda("an SGD step", params.device.index);
}
void adamw_step(BufferView params, BufferView, float*, float*, const kernels::AdamWCoefficients&,
                const float*, const kernels::NonfiniteGuardState*, void*) {
  no_cuda("an AdamW step", params.device.index);
}
ClipMemory alloc_clip(int ordinal) {
  no_cuda("gradient clipping scratch", ordinal);
}
void free_clip(const ClipMemory&, int) noexcept {}
void sum_squares_async(BufferView x, double*, void*) {
  no_cuda("a gradient norm", x.device.index);
}
void clip_by_norm(BufferView x, const double*, double, void*) {
  no_cuda("gradient clipping", x.device.index);
}
void finite_probe(const double*, float*, int ordinal, void*) {
  no_cuda("a finiteness probe", ordinal);
}
double read_double(const double*, int ordinal) {
  no_cuda("a device read", ordinal);
}
double sum_squares(BufferView x) {
  no_cuda("a gradient norm", x.device.index);
}
void scale(BufferView x, float, void*) {
  no_cuda("buffer scaling", x.device.index);
}

GuardMemory alloc_guard(int ordinal) {
  no_cuda("the --nonfinite guard state", ordinal);
}
void free_guard(const GuardMemory&, int) noexcept {}
void guard_first_nonfinite(BufferView x, unsigned long long, unsigned long long*, void*) {
  no_cuda("a finiteness check", x.device.index);
}
void guard_save_loss(const GuardMemory&, BufferView loss_totals, void*) {
  no_cuda("the --nonfinite guard", loss_totals.device.index);
}
void guard_check_loss(const GuardMemory&, BufferView loss_totals, float*, void*) {
  no_cuda("the --nonfinite guard", loss_totals.device.index);
}
void guard_decide(const GuardMemory&, unsigned long long, unsigned long long, unsigned long long,
                  BufferView loss_totals, void*) {
  no_cuda("the --nonfinite guard", loss_totals.device.index);
}
void guard_set_scaler(const GuardMemory&, const kernels::LossScalerState&, int ordinal) {
  no_cuda("the loss scaler", ordinal);
}

}  // namespace ringtrain::optim_cuda
