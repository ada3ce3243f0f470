// Host-side launchers for kernels/nonfinite_guard.cu: the --nonfinite check
// and decision, queued on a stream and never waited for. Streams travel as
// void* so that this header needs no CUDA include.
#pragma once

#include <cstddef>

#include "kernels/nonfinite_guard.cuh"

namespace ringtrain::kernels {

// *first_bad = min(*first_bad, offset + i) over the non-finite x[i].
void first_nonfinite_index_f32_cuda(const float* x, std::size_t n, unsigned long long offset,
                                    unsigned long long* first_bad, void* stream);
// state->loss_before = loss_totals[0..kGuardLossTotals).
void nonfinite_save_loss_cuda(NonfiniteGuardState* state, const double* loss_totals, void* stream);
// When loss_totals[0] is non-finite: state->local_loss_bad = 1 and, if poison
// is not null, *poison = NaN (so the all-reduce carries the flag to every rank).
void nonfinite_loss_check_cuda(NonfiniteGuardState* state, const double* loss_totals, float* poison,
                               void* stream);
// nonfinite_guard_decide on the device, then copies the state to `mirror`
// (mapped host memory) for the host to read after its next synchronisation.
void nonfinite_guard_decide_cuda(NonfiniteGuardState* state, NonfiniteGuardState* mirror,
                                 unsigned long long step, unsigned long long max_skips,
                                 unsigned long long samples, double* loss_totals, void* stream);

}  // namespace ringtrain::kernels
