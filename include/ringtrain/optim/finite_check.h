// Finiteness of an f32 buffer (gradients, parameters): the guard against a
// NaN or Inf that would otherwise train on and be checkpointed.
#pragma once

#include <cstddef>
#include <optional>

#include "ringtrain/core/buffer_view.h"

namespace ringtrain {

// True when every element is finite. CPU: one pass; CUDA: the sum of squares
// in double (NaN or Inf exactly when an element is, since a float squared
// cannot overflow a double), which waits for the result (a host sync).
bool all_finite(BufferView buf);

// The index of the first NaN or Inf element, if any. CUDA buffers are copied
// to the host: for error messages, not for every step.
std::optional<std::size_t> first_nonfinite(BufferView buf);

}  // namespace ringtrain
