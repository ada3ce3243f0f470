// CPU arithmetic of the collectives, over raw typed memory. The per-element
// math is kernels/reduce.cuh; these loops are written so that the compiler
// vectorises them (the op is chosen outside the loop). Internal to src/comm.
#pragma once

#include <cstddef>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/dtype.h"

namespace ringtrain::comm_detail {

// Where reduce_to_many's results go next. `local_dst` is the destination this
// rank reads itself (kept in cache while it fits); the others are for other
// cores and, when large, are written past this core's cache. may_stream =
// false keeps every result in cache (the caller reads them all again at once).
struct StoreHint {
  bool may_stream = true;
  int local_dst = -1;
};

// For every i in [0, count): v = srcs[0][i] op srcs[1][i] op ... (f32
// accumulation for f16/bf16), divided by avg_divisor when op is avg, then
// written to dsts[0][i], dsts[1][i], .... A dst may alias a src at the same
// index (in place), never elsewhere.
void reduce_to_many(DType dtype, ReduceOp op, const void* const* srcs, int nsrc, void* const* dsts,
                    int ndst, std::size_t count, int avg_divisor, StoreHint hint = {});

// dst[i] = a[i] op b[i] (avg counts as sum here). dst may alias a or b.
void combine(DType dtype, ReduceOp op, void* dst, const void* a, const void* b, std::size_t count);

// buf[i] /= divisor (integers truncate toward zero).
void divide(DType dtype, void* buf, std::size_t count, int divisor);

// f16/bf16 <-> f32 arrays.
void widen_to_f32(DType dtype, const void* src, float* dst, std::size_t count);
void narrow_from_f32(DType dtype, const float* src, void* dst, std::size_t count);

inline bool is_16bit_float(DType t) {
  return t == DType::f16 || t == DType::bf16;
}

}  // namespace ringtrain::comm_detail
