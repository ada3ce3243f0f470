// The optim layer's CUDA side, behind a backend-neutral interface: the CUDA
// build implements it in src/optim/cuda/cuda_backend.cpp, the CPU-only build in
// src/optim/cuda_backend_nocuda.cpp, where every call is a clear Error. So the
// optimizer code dispatches on BufferView::device with no #ifdef.
// Views passed here are f32 on a CUDA device, already checked by the caller.
#pragma once

#include <cstddef>

#include "kernels/adamw.cuh"
#include "kernels/nonfinite_guard.cuh"
#include "ringtrain/core/buffer_view.h"

namespace ringtrain::optim_cuda {

// count zeroed floats on CUDA device `ordinal` (nullptr for count 0).
float* alloc_zeroed_f32(std::size_t count, int ordinal);
void free_f32(float* ptr, int ordinal) noexcept;
// Blocking copies between host memory and a CUDA view (tests, checkpoints).
void copy_to_device(BufferView dst, const float* src);
void copy_to_host(float* dst, BufferView src);

// The updates are no-ops on the device unless gate->apply (nullptr: always),
// queued on `stream` (cudaStream_t as void*; nullptr: the default stream).
void sgd_step(BufferView params, BufferView grads, float* momentum_buf, float lr, float momentum,
              float weight_decay, bool nesterov, const float* decay_mask,
              const kernels::NonfiniteGuardState* gate, void* stream);
void adamw_step(BufferView params, BufferView grads, float* exp_avg, float* exp_avg_sq,
                const kernels::AdamWCoefficients& coefficients, const float* decay_mask,
                const kernels::NonfiniteGuardState* gate, void* stream);
// Sum of squares in double; waits for the result.
double sum_squares(BufferView x);
// The device-side clip (GradClipper): scratch of kernels::kSumSquaresScratchCount
// doubles and one float, queued work on `stream`, and a counted read.
struct ClipMemory {
  double* scratch = nullptr;  // [0]: the sum of squares
  float* probe = nullptr;
};
ClipMemory alloc_clip(int ordinal);
void free_clip(const ClipMemory& memory, int ordinal) noexcept;
void sum_squares_async(BufferView x, double* scratch, void* stream);
void clip_by_norm(BufferView x, const double* sum_squares, double max_norm, void* stream);
void finite_probe(const double* sum_squares, float* probe, int ordinal, void* stream);
double read_double(const double* value, int ordinal);
void scale(BufferView x, float factor, void* stream);

// The --nonfinite state on a device (nonfinite_tracker.h): the state in device
// memory and its mirror in mapped host memory, which the device writes after
// each decision and the host reads without a copy.
struct GuardMemory {
  kernels::NonfiniteGuardState* state = nullptr;          // device
  kernels::NonfiniteGuardState* mirror_host = nullptr;    // host view of the mirror
  kernels::NonfiniteGuardState* mirror_device = nullptr;  // device view of the mirror
};
GuardMemory alloc_guard(int ordinal);
void free_guard(const GuardMemory& memory, int ordinal) noexcept;
// Queued on `stream` (cudaStream_t as void*) of the guard's device, never waited for.
void guard_first_nonfinite(BufferView x, unsigned long long offset, unsigned long long* first_bad,
                           void* stream);
void guard_save_loss(const GuardMemory& memory, BufferView loss_totals, void* stream);
void guard_check_loss(const GuardMemory& memory, BufferView loss_totals, float* poison,
                      void* stream);
void guard_decide(const GuardMemory& memory, unsigned long long step, unsigned long long max_skips,
                  unsigned long long samples, BufferView loss_totals, void* stream);
// Sets the loss scaler inside the device state and its mirror (a blocking
// copy: at start-up and resume only).
void guard_set_scaler(const GuardMemory& memory, const kernels::LossScalerState& scaler,
                      int ordinal);

}  // namespace ringtrain::optim_cuda
