// Host-side launchers for kernels/transformer.cu, the GPT-2 class layers'
// kernels. Streams travel as void*. Every reduction here has a fixed order
// (warp shuffles, ordered loops; no float atomics), so a step repeats bit for
// bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ringtrain/core/dtype.h"

namespace ringtrain::kernels {

// y[r, :] = w[ids[r], :]; an id that is not an integer in [0, vocab) gives a
// row of NaN (the non-finite guard then reports the step; the CPU path names
// the id instead).
// y (and dy below) of the storage dtype t (f32, bf16, f16).
void token_embedding_forward_cuda(const float* ids, const float* w, std::size_t rows,
                                  std::size_t vocab, std::size_t dim, void* y, DType t,
                                  void* stream);
// Bytes of device workspace token_embedding_backward_cuda needs for `rows`.
std::size_t token_embedding_backward_workspace_bytes(std::size_t rows, std::size_t vocab);
// dw[v, :] (+)= sum of dy[r, :] over the rows r with ids[r] == v, in row order:
// the ids are sorted by a stable radix sort (row indices as values), then one
// block per distinct id walks its rows. dw is zeroed first unless accumulate.
void token_embedding_backward_cuda(const float* ids, const void* dy, DType t, std::size_t rows,
                                   std::size_t vocab, std::size_t dim, float* dw, bool accumulate,
                                   void* workspace, std::size_t workspace_bytes, void* stream);
// y[b, i] = x[b, i] + w[i] for i < n (x may be y).
void add_broadcast_rows_cuda(const float* x, const float* w, float* y, std::size_t batch,
                             std::size_t n, void* stream);
// One warp per row of c: y, and the row's mean and 1/std. x, y and dy are of
// the storage dtype t (f32, bf16, f16), dx of dx_type (t or f32).
void layer_norm_forward_cuda(const void* x, DType t, const float* w, const float* b,
                             std::size_t rows, std::size_t c, float eps, void* y, float* mean,
                             float* rstd, void* stream);
// One warp per row: dx (skipped when null); the weight and bias gradients
// are kernels/layer_norm_param_grad.h's.
void layer_norm_backward_cuda(const void* x, DType t, const float* w, const void* dy,
                              std::size_t rows, std::size_t c, const float* mean, const float* rstd,
                              void* dx, DType dx_type, void* stream);
// Rows of t x t score matrices (row i of each matrix keeps columns 0..i): one
// warp per row. s may be p; dp may be ds.
void causal_softmax_forward_cuda(const float* s, float* p, std::size_t matrices, std::size_t t,
                                 void* stream);
void causal_softmax_backward_cuda(const float* p, const float* dp, float* ds, std::size_t matrices,
                                  std::size_t t, float scale, void* stream);

}  // namespace ringtrain::kernels
