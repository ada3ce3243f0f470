#include "ringtrain/ops/transformer_ops.h"

#include <algorithm>
#include <cstring>

#include "kernels/causal_attention.cuh"
#include "kernels/layer_norm.cuh"
#include "kernels/storage.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"
#include "ringtrain/ops/bias.h"

namespace ringtrain {

void token_embedding_forward(const ComputeContext& ctx, const float* ids, const float* w,
                             std::size_t rows, std::size_t t, std::size_t vocab, std::size_t dim,
                             float* y, const std::string& layer) {
  token_embedding_forward(ctx, ids, w, rows, t, vocab, dim, view_of(y, rows * dim, ctx.device()),
                          layer);
}

void token_embedding_forward(const ComputeContext& ctx, const float* ids, const float* w,
                             std::size_t rows, std::size_t t, std::size_t vocab, std::size_t dim,
                             BufferView y, const std::string& layer) {
  if (ctx.is_cuda())
    return detail::gpu_token_embedding_forward(ctx.stream(), ids, w, rows, vocab, dim, y);
  kernels::with_storage(y.dtype, [&](auto storage) {
    using T = decltype(storage);
    T* ys = y.as<T>();
    for (std::size_t r = 0; r < rows; ++r) {
      const float v = ids[r];
      const auto id = static_cast<long long>(v);
      RT_CHECK(v >= 0.0f && static_cast<float>(id) == v && static_cast<std::size_t>(id) < vocab,
               "layer '{}': input {} of sample {} position {} is not a token id in [0, {})", layer,
               v, r / t, r % t, vocab);
      const float* row = w + static_cast<std::size_t>(id) * dim;
      for (std::size_t j = 0; j < dim; ++j) kernels::store(ys, r * dim + j, row[j]);
    }
  });
}

std::size_t token_embedding_backward_workspace_bytes(const ComputeContext& ctx, std::size_t rows,
                                                     std::size_t vocab) {
  return ctx.is_cuda() ? detail::gpu_token_embedding_backward_workspace_bytes(rows, vocab) : 0;
}

void token_embedding_backward(const ComputeContext& ctx, const float* ids, const float* dy,
                              std::size_t rows, std::size_t vocab, std::size_t dim, float* dw,
                              bool accumulate, void* workspace, std::size_t workspace_bytes) {
  token_embedding_backward(ctx, ids, view_of(dy, rows * dim, ctx.device()), rows, vocab, dim, dw,
                           accumulate, workspace, workspace_bytes);
}

void token_embedding_backward(const ComputeContext& ctx, const float* ids, BufferView dy,
                              std::size_t rows, std::size_t vocab, std::size_t dim, float* dw,
                              bool accumulate, void* workspace, std::size_t workspace_bytes) {
  if (ctx.is_cuda())
    return detail::gpu_token_embedding_backward(ctx.stream(), ids, dy, rows, vocab, dim, dw,
                                                accumulate, workspace, workspace_bytes);
  if (!accumulate) std::fill_n(dw, vocab * dim, 0.0f);
  kernels::with_storage(dy.dtype, [&](auto storage) {
    using T = decltype(storage);
    const T* g = dy.as<const T>();
    for (std::size_t r = 0; r < rows; ++r) {
      float* row = dw + static_cast<std::size_t>(ids[r]) * dim;
      for (std::size_t j = 0; j < dim; ++j) row[j] += kernels::load(g, r * dim + j);
    }
  });
}

void add_broadcast_rows(const ComputeContext& ctx, const float* x, const float* w, float* y,
                        std::size_t batch, std::size_t n) {
  if (ctx.is_cuda()) return detail::gpu_add_broadcast_rows(ctx.stream(), x, w, y, batch, n);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < n; ++i) y[b * n + i] = x[b * n + i] + w[i];
}

void broadcast_rows_grad(const ComputeContext& ctx, const float* dy, float* dw, std::size_t batch,
                         std::size_t n, std::size_t n_total, bool accumulate) {
  if (ctx.is_cuda()) {
    // The ordered column sums of the bias gradient: dy is [batch, n] rows.
    bias_grad(ctx, dy, dw, batch, n, 1, accumulate);
    if (!accumulate) detail::gpu_zero(ctx.stream(), dw + n, (n_total - n) * sizeof(float));
    return;
  }
  if (!accumulate) std::fill_n(dw, n_total, 0.0f);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < n; ++i) dw[i] += dy[b * n + i];
}

void zero_floats(const ComputeContext& ctx, float* dst, std::size_t n) {
  if (ctx.is_cuda()) return detail::gpu_zero(ctx.stream(), dst, n * sizeof(float));
  std::fill_n(dst, n, 0.0f);
}

void fill_bytes(const ComputeContext& ctx, void* dst, std::size_t bytes, unsigned char value) {
  if (ctx.is_cuda()) return detail::gpu_fill_bytes(ctx.stream(), dst, bytes, value);
  std::memset(dst, value, bytes);
}

void layer_norm_forward(const ComputeContext& ctx, const float* x, const float* w, const float* b,
                        std::size_t rows, std::size_t c, float eps, float* y, float* mean,
                        float* rstd) {
  const Device d = ctx.device();
  layer_norm_forward(ctx, view_of(x, rows * c, d), w, b, rows, c, eps, view_of(y, rows * c, d),
                     mean, rstd);
}

void layer_norm_backward(const ComputeContext& ctx, const float* x, const float* w, const float* dy,
                         std::size_t rows, std::size_t c, const float* mean, const float* rstd,
                         float* dx, float* dw, float* db, bool accumulate) {
  const Device d = ctx.device();
  layer_norm_backward(ctx, view_of(x, rows * c, d), w, view_of(dy, rows * c, d), rows, c, mean,
                      rstd, view_of(dx, dx != nullptr ? rows * c : 0, d), dw, db, accumulate);
}

void layer_norm_forward(const ComputeContext& ctx, BufferView x, const float* w, const float* b,
                        std::size_t rows, std::size_t c, float eps, BufferView y, float* mean,
                        float* rstd) {
  if (ctx.is_cuda())
    return detail::gpu_layer_norm_forward(ctx.stream(), x, w, b, rows, c, eps, y, mean, rstd);
  const int ci = static_cast<int>(c);
  kernels::with_storage(y.dtype, [&](auto storage) {
    using T = decltype(storage);
    const T* xs = x.as<const T>();
    T* ys = y.as<T>();
    for (std::size_t r = 0; r < rows; ++r)
      kernels::layer_norm_row_forward(xs + r * c, w, b, ci, eps, ys + r * c, &mean[r], &rstd[r]);
  });
}

void layer_norm_backward(const ComputeContext& ctx, BufferView x, const float* w, BufferView dy,
                         std::size_t rows, std::size_t c, const float* mean, const float* rstd,
                         BufferView dx, float* dw, float* db, bool accumulate) {
  if (ctx.is_cuda()) {
    detail::gpu_layer_norm_backward(ctx.stream(), x, w, dy, rows, c, mean, rstd, dx);
    detail::gpu_layer_norm_param_grad(detail::handles_of(ctx), x, dy, rows, c, mean, rstd, dw, db,
                                      accumulate);
    return;
  }
  if (!accumulate) {
    std::fill_n(dw, c, 0.0f);
    std::fill_n(db, c, 0.0f);
  }
  const int ci = static_cast<int>(c);
  kernels::with_storage_pair(dy.dtype, dx.dtype, [&](auto storage, auto dx_storage) {
    using T = decltype(storage);
    using D = decltype(dx_storage);
    const T* xs = x.as<const T>();
    const T* dys = dy.as<const T>();
    D* dxs = dx.as<D>();
    for (std::size_t r = 0; r < rows; ++r)
      kernels::layer_norm_row_backward(xs + r * c, w, dys + r * c, ci, mean[r], rstd[r],
                                       dxs != nullptr ? dxs + r * c : nullptr, dw, db);
  });
}

void causal_softmax_forward(const ComputeContext& ctx, const float* s, float* p,
                            std::size_t matrices, std::size_t t) {
  if (ctx.is_cuda()) return detail::gpu_causal_softmax_forward(ctx.stream(), s, p, matrices, t);
  const int ti = static_cast<int>(t);
  for (std::size_t m = 0; m < matrices; ++m)
    for (int i = 0; i < ti; ++i) {
      const std::size_t at = (m * t + static_cast<std::size_t>(i)) * t;
      kernels::causal_softmax_row(s + at, i, ti, p + at);
    }
}

void causal_softmax_backward(const ComputeContext& ctx, const float* p, const float* dp, float* ds,
                             std::size_t matrices, std::size_t t, float scale) {
  if (ctx.is_cuda())
    return detail::gpu_causal_softmax_backward(ctx.stream(), p, dp, ds, matrices, t, scale);
  const int ti = static_cast<int>(t);
  for (std::size_t m = 0; m < matrices; ++m)
    for (int i = 0; i < ti; ++i) {
      const std::size_t at = (m * t + static_cast<std::size_t>(i)) * t;
      kernels::causal_softmax_row_backward(p + at, dp + at, i, ti, scale, ds + at);
    }
}

}  // namespace ringtrain
