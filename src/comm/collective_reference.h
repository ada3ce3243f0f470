// Checkable collective data, shared by `ringtrain bench allreduce|...` (its
// #wrong column) and the collectives tests, so both judge a result by the same
// rule: inputs are a function of (seed, rank, index), references are computed
// independently in double (or int64) precision, then compared exactly for
// integers and within a tolerance derived from the dtype for floats.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/reduce.cuh"
#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/dtype.h"

namespace ringtrain::collective_reference {

// Quarter steps in [-12, 12]: exact in every float type, never all ones.
inline double input_value(std::uint64_t seed, int rank, std::size_t index) {
  const std::uint64_t h = (seed * 2654435761u + static_cast<std::uint64_t>(rank) * 7919u +
                           index * 31u + (index >> 7) * 17u) %
                          97u;
  return (static_cast<double>(h) - 48.0) * 0.25;
}

// Integers get a wider range so that a misplaced element is visible.
inline std::int64_t input_int(std::uint64_t seed, int rank, std::size_t index) {
  return static_cast<std::int64_t>(
             (seed * 1000003u + static_cast<std::uint64_t>(rank) * 104729u + index * 7u) %
             200003u) -
         100000;
}

inline void store(DType t, void* base, std::size_t i, double v, std::int64_t iv) {
  switch (t) {
    case DType::f32:
      static_cast<float*>(base)[i] = static_cast<float>(v);
      break;
    case DType::f64:
      static_cast<double*>(base)[i] = v;
      break;
    case DType::f16:
      static_cast<std::uint16_t*>(base)[i] = kernels::float_to_half(static_cast<float>(v));
      break;
    case DType::bf16:
      static_cast<std::uint16_t*>(base)[i] = kernels::float_to_bf16(static_cast<float>(v));
      break;
    case DType::i32:
      static_cast<std::int32_t*>(base)[i] = static_cast<std::int32_t>(iv);
      break;
    case DType::i64:
      static_cast<std::int64_t*>(base)[i] = iv;
      break;
  }
}

inline double load(DType t, const void* base, std::size_t i) {
  switch (t) {
    case DType::f32:
      return static_cast<const float*>(base)[i];
    case DType::f64:
      return static_cast<const double*>(base)[i];
    case DType::f16:
      return kernels::half_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::bf16:
      return kernels::bf16_to_float(static_cast<const std::uint16_t*>(base)[i]);
    case DType::i32:
      return static_cast<const std::int32_t*>(base)[i];
    case DType::i64:
      return static_cast<double>(static_cast<const std::int64_t*>(base)[i]);
  }
  return 0;
}

inline std::int64_t load_int(DType t, const void* base, std::size_t i) {
  return t == DType::i32 ? static_cast<const std::int32_t*>(base)[i]
                         : static_cast<const std::int64_t*>(base)[i];
}

// Fills elements [0, count) of `base` with rank `rank`'s input, elements
// numbered from `first` (so a block of a bigger logical buffer can be filled).
inline void fill_input(DType t, void* base, std::size_t count, std::uint64_t seed, int rank,
                       std::size_t first = 0) {
  for (std::size_t i = 0; i < count; ++i)
    store(t, base, i, input_value(seed, rank, first + i), input_int(seed, rank, first + i));
}

inline double tolerance(DType t, double ref) {
  double eps = 0;
  switch (t) {
    case DType::f32:
      eps = 1.2e-7;
      break;
    case DType::f64:
      eps = 2.3e-16;
      break;
    case DType::f16:
      eps = 9.8e-4;
      break;
    case DType::bf16:
      eps = 7.9e-3;
      break;
    default:
      return 0;
  }
  return eps * (std::fabs(ref) + 1.0) * 2.0;
}

// The reduction of element `index` over ranks 0..size-1, as `op` defines it.
// rounding_steps: how many times the backend may round a partial result in
// the element's own type (communicator.h states each backend's arithmetic):
// 1 for the CPU backends (f32 accumulation, one rounding), size + 1 for NCCL
// (a rounding at every hop of the ring, and ncclAvg's scaling of each input).
// The bound scales with the sum of |input|, which bounds every partial sum.
inline bool matches_reduction(DType t, ReduceOp op, int size, std::uint64_t seed, std::size_t index,
                              const void* got, std::size_t got_index, int rounding_steps = 1) {
  if (!dtype_is_float(t)) {
    std::int64_t acc = input_int(seed, 0, index);
    for (int r = 1; r < size; ++r) {
      const std::int64_t v = input_int(seed, r, index);
      acc = op == ReduceOp::max   ? std::max(acc, v)
            : op == ReduceOp::min ? std::min(acc, v)
                                  : acc + v;
    }
    if (op == ReduceOp::avg) acc /= size;
    return load_int(t, got, got_index) == acc;
  }
  double acc = input_value(seed, 0, index);
  double magnitude = std::fabs(acc);
  for (int r = 1; r < size; ++r) {
    const double v = input_value(seed, r, index);
    magnitude += std::fabs(v);
    acc = op == ReduceOp::max ? std::max(acc, v) : op == ReduceOp::min ? std::min(acc, v) : acc + v;
  }
  if (op == ReduceOp::avg) {
    acc /= size;
    magnitude /= size;
  }
  if (op == ReduceOp::max || op == ReduceOp::min) magnitude = std::fabs(acc);  // exact: no rounding
  return std::fabs(load(t, got, got_index) - acc) <= tolerance(t, magnitude) * rounding_steps;
}

inline bool matches_input(DType t, int rank, std::uint64_t seed, std::size_t index, const void* got,
                          std::size_t got_index) {
  if (!dtype_is_float(t)) return load_int(t, got, got_index) == input_int(seed, rank, index);
  return load(t, got, got_index) == static_cast<double>(input_value(seed, rank, index));
}

}  // namespace ringtrain::collective_reference
