#include "optim/nonfinite_tracker.h"

#include <cstring>
#include <limits>

#include "ringtrain/core/check.h"
#include "ringtrain/optim/finite_check.h"

namespace ringtrain {

NonfiniteTracker::NonfiniteTracker(Device device, std::uint64_t max_consecutive_skips,
                                   BufferView loss_totals)
    : device_(device), max_skips_(max_consecutive_skips), loss_totals_(loss_totals) {
  RT_CHECK(loss_totals.dtype == DType::f64 && loss_totals.count >= kernels::kGuardLossTotals &&
               loss_totals.device == device,
           "non-finite guard: the loss totals must be {} f64 values on {}",
           kernels::kGuardLossTotals, device_name(device));
  if (device_.is_cuda()) memory_ = optim_cuda::alloc_guard(device_.index);
}

NonfiniteTracker::~NonfiniteTracker() {
  if (device_.is_cuda()) optim_cuda::free_guard(memory_, device_.index);
}

void NonfiniteTracker::begin_step(void* stream) {
  loss_checked_ = false;
  if (device_.is_cuda()) {
    optim_cuda::guard_save_loss(memory_, loss_totals_, stream);
    return;
  }
  std::memcpy(host_.loss_before, loss_totals_.as<const double>(), sizeof(host_.loss_before));
}

void NonfiniteTracker::check_local(BufferView slice, std::size_t offset, void* stream) {
  RT_CHECK(slice.dtype == DType::f32 && slice.device == device_,
           "non-finite guard: expected f32 gradients on {}", device_name(device_));
  const bool check_loss = !loss_checked_;
  loss_checked_ = true;
  float* poison = slice.count > 0 ? slice.as<float>() : nullptr;
  if (device_.is_cuda()) {
    optim_cuda::guard_first_nonfinite(slice, offset, &memory_.state->local_first_bad, stream);
    if (check_loss) optim_cuda::guard_check_loss(memory_, loss_totals_, poison, stream);
    return;
  }
  // The vectorised pass first: the index is looked for on a bad step only.
  if (host_.local_first_bad == kernels::kNoNonfiniteIndex && !all_finite(slice))
    if (const auto bad = first_nonfinite(slice)) host_.local_first_bad = offset + *bad;
  if (check_loss && kernels::nonfinite_value(loss_totals_.as<const double>()[0])) {
    host_.local_loss_bad = 1;
    if (poison != nullptr) *poison = std::numeric_limits<float>::quiet_NaN();
  }
}

bool NonfiniteTracker::decide(std::uint64_t step, BufferView averaged, std::uint64_t samples,
                              void* stream, std::size_t offset, bool averaged_is_local) {
  if (device_.is_cuda()) {
    if (!averaged_is_local)
      optim_cuda::guard_first_nonfinite(averaged, offset, &memory_.state->average_first_bad,
                                        stream);
    optim_cuda::guard_decide(memory_, step, max_skips_, samples, loss_totals_, stream);
    return memory_.mirror_host->stopped == 0;
  }
  if (!averaged_is_local && !all_finite(averaged))
    if (const auto bad = first_nonfinite(averaged)) host_.average_first_bad = *bad + offset;
  return kernels::nonfinite_guard_decide(host_, step, max_skips_, samples,
                                         loss_totals_.as<double>());
}

void NonfiniteTracker::set_loss_scaler(const kernels::LossScalerState& scaler) {
  if (device_.is_cuda()) return optim_cuda::guard_set_scaler(memory_, scaler, device_.index);
  host_.scaler = scaler;
}

kernels::NonfiniteGuardState NonfiniteTracker::observed() const {
  if (!device_.is_cuda()) return host_;
  // Written by the device after each decision; the host reads it after a
  // synchronisation, which orders those writes before this read.
  kernels::NonfiniteGuardState s;
  std::memcpy(&s, static_cast<const void*>(memory_.mirror_host), sizeof(s));
  return s;
}

}  // namespace ringtrain
