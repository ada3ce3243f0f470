// The ops of the GPT-2 class layers (src/model/*_layer.h), on the CPU
// or a GPU by the context, like every op: token and position embeddings,
// layer_norm over rows, and the causal softmax of attention scores. The CPU
// and GPU share the row arithmetic (kernels/layer_norm.cuh,
// kernels/causal_attention.cuh); every GPU reduction has a fixed order, so
// a step repeats bit for bit.
#pragma once

#include <cstddef>
#include <string>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/compute_context.h"

namespace ringtrain {

// y[r] = w[ids[r]] for `rows` ids given as floats (exact below 2^24), rows of
// `dim`. A value that is not a token id in [0, vocab) is an Error naming the
// layer, the sample and the position (`t` ids per sample) on the CPU; on a
// GPU it gives a row of NaN, which the non-finite guard reports (the GPU does
// not stop to check).
void token_embedding_forward(const ComputeContext& ctx, const float* ids, const float* w,
                             std::size_t rows, std::size_t t, std::size_t vocab, std::size_t dim,
                             float* y, const std::string& layer);
// Device bytes token_embedding_backward needs at `rows` (0 on the CPU).
std::size_t token_embedding_backward_workspace_bytes(const ComputeContext& ctx, std::size_t rows,
                                                     std::size_t vocab);
// dw[v] (+)= sum of dy[r] over rows with ids[r] == v, in row order on both
// sides; dw is zeroed first unless accumulate.
void token_embedding_backward(const ComputeContext& ctx, const float* ids, const float* dy,
                              std::size_t rows, std::size_t vocab, std::size_t dim, float* dw,
                              bool accumulate, void* workspace, std::size_t workspace_bytes);
// The stored forms: y and dy are views of the model's storage dtype (f32, bf16,
// f16); the ids stay fp32, the table and its gradient fp32.
void token_embedding_forward(const ComputeContext& ctx, const float* ids, const float* w,
                             std::size_t rows, std::size_t t, std::size_t vocab, std::size_t dim,
                             BufferView y, const std::string& layer);
void token_embedding_backward(const ComputeContext& ctx, const float* ids, BufferView dy,
                              std::size_t rows, std::size_t vocab, std::size_t dim, float* dw,
                              bool accumulate, void* workspace, std::size_t workspace_bytes);

// y[b, i] = x[b, i] + w[i], i < n.
void add_broadcast_rows(const ComputeContext& ctx, const float* x, const float* w, float* y,
                        std::size_t batch, std::size_t n);
// dw[i] (+)= sum over b of dy[b, i] (ordered), then dw[n, n_total) zeroed
// unless accumulate.
void broadcast_rows_grad(const ComputeContext& ctx, const float* dy, float* dw, std::size_t batch,
                         std::size_t n, std::size_t n_total, bool accumulate);
// dst = 0, in the context's stream order (copies: ringtrain/ops/merge.h).
void zero_floats(const ComputeContext& ctx, float* dst, std::size_t n);
// Every byte of [dst, dst + bytes) set to `value`, in the context's order.
void fill_bytes(const ComputeContext& ctx, void* dst, std::size_t bytes, unsigned char value);

// Each row of c: y = (x - mean) / sqrt(var + eps) * w + b, keeping mean and
// 1/std per row.
void layer_norm_forward(const ComputeContext& ctx, const float* x, const float* w, const float* b,
                        std::size_t rows, std::size_t c, float eps, float* y, float* mean,
                        float* rstd);
// dx (skipped when null), and dw, db (+)= their sums over the rows: on a GPU
// one reduction of dy * xhat (xhat computed again from x) and dy, in the
// order of a bias gradient over [rows, c]; the CPU adds row by row.
void layer_norm_backward(const ComputeContext& ctx, const float* x, const float* w, const float* dy,
                         std::size_t rows, std::size_t c, const float* mean, const float* rstd,
                         float* dx, float* dw, float* db, bool accumulate);
// The stored forms: x, y and dy are views of the model's storage dtype (f32,
// bf16, f16), dx of it or f32 (a null ptr: not wanted); the statistics and
// the sums are fp32, each output rounded once. The forms above are these with
// f32 views.
void layer_norm_forward(const ComputeContext& ctx, BufferView x, const float* w, const float* b,
                        std::size_t rows, std::size_t c, float eps, BufferView y, float* mean,
                        float* rstd);
void layer_norm_backward(const ComputeContext& ctx, BufferView x, const float* w, BufferView dy,
                         std::size_t rows, std::size_t c, const float* mean, const float* rstd,
                         BufferView dx, float* dw, float* db, bool accumulate);

// `matrices` t x t score matrices: row i of each becomes softmax over columns
// 0..i, 0 after (s may be p).
void causal_softmax_forward(const ComputeContext& ctx, const float* s, float* p,
                            std::size_t matrices, std::size_t t);
// ds = scale * p * (dp - sum p dp) row by row, 0 on the masked part (dp may be ds).
void causal_softmax_backward(const ComputeContext& ctx, const float* p, const float* dp, float* ds,
                             std::size_t matrices, std::size_t t, float scale);

}  // namespace ringtrain
