// A LayerNorm's weight and bias gradients as one channel reduction over its
// rows (kernels/channel_reduce.cuh), xhat computed again from x and the row's
// saved mean and rstd as the backward kernels compute it. They were two bias
// gradients, of an fp32 [rows, c] scratch of dy * xhat that the backward
// kernel wrote and of dy: per element 10 bytes (the scratch written and read,
// dy read again) where this reads x and dy, 4 in 16 bits, and a reduction's
// launches (one, or two with the slices' merge) instead of twice as many. The same values in the
// same order (the reduction's split depends on the shape alone), so the same bits.
#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/bias.cuh"
#include "kernels/channel_reduce.cuh"
#include "kernels/fast_divide.cuh"
#include "kernels/layer_norm.cuh"
#include "kernels/layer_norm_param_grad.h"
#include "kernels/storage.cuh"
#include "kernels/vector8.cuh"

namespace ringtrain::kernels {

namespace {

// Element a of the [rows, c] tensor: {dy * xhat, dy} (layer_norm_dy_xhat).
template <typename T>
struct LayerNormGradValue {
  const T* x;
  const T* dy;
  const float* mean;
  const float* rstd;
  std::size_t channels;
  FastDivide by_channels;  // where rows * c fits 32 bits
  bool fits_32_bits;
  __device__ std::size_t row_of(std::size_t a) const {
    return fits_32_bits ? by_channels.divide(static_cast<std::uint32_t>(a)) : a / channels;
  }
  __device__ Sums<2> operator()(std::size_t a, std::size_t) const {
    const std::size_t r = row_of(a);
    const float g = load(dy, a);
    return {{layer_norm_dy_xhat(load(x, a), g, mean[r], rstd[r]), g}};
  }
  bool rows8_aligned() const { return vector8_aligned(x) && vector8_aligned(dy); }
  // Elements a ... a + 7 of one row (8 | c).
  __device__ void values8(std::size_t a, std::size_t, Sums<2> (&out)[kVector8]) const {
    const std::size_t r = row_of(a);
    float xs[kVector8], gs[kVector8];
    load8(x, a, xs);
    load8(dy, a, gs);
    const float m = mean[r], s = rstd[r];
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k)
      out[k] = {{layer_norm_dy_xhat(xs[k], gs[k], m, s), gs[k]}};
  }
};

// The totals into dw and db, as BiasGradFinish writes a bias gradient.
struct LayerNormGradFinish {
  float* dw;
  float* db;
  bool accumulate;
  __device__ void operator()(std::size_t c, const Sums<2>& t) const {
    dw[c] = bias_grad_combine(accumulate ? dw[c] : 0.0f, t.v[0]);
    db[c] = bias_grad_combine(accumulate ? db[c] : 0.0f, t.v[1]);
  }
};

}  // namespace

void layer_norm_param_grad_cuda(const void* x, const void* dy, DType t, const float* mean,
                                const float* rstd, std::size_t rows, std::size_t c, float* dw,
                                float* db, bool accumulate, float* scratch,
                                std::size_t scratch_floats, void* stream) {
  const bool fits = rows * c <= UINT32_MAX && c <= UINT32_MAX;
  const FastDivide by_channels(static_cast<std::uint32_t>(fits && c > 0 ? c : 1));
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    reduce_channels<2>(rows, c, 1,
                       LayerNormGradValue<T>{static_cast<const T*>(x), static_cast<const T*>(dy),
                                             mean, rstd, c, by_channels, fits},
                       LayerNormGradFinish{dw, db, accumulate}, scratch, scratch_floats, stream);
  });
}

}  // namespace ringtrain::kernels
