// Fused BatchNorm + (add +) ReLU kernels: kernels/batch_norm_relu.h says what each does.
#include <cstdint>
#include <type_traits>

#include "core/cuda/check_cuda.h"
#include "kernels/batch_norm.cuh"
#include "kernels/batch_norm_relu.cuh"
#include "kernels/batch_norm_relu.h"
#include "kernels/channel_reduce.cuh"
#include "kernels/fast_divide.cuh"
#include "kernels/launch_shape.cuh"
#include "kernels/precision.cuh"
#include "kernels/storage.cuh"
#include "kernels/vector8.cuh"

namespace ringtrain::kernels {

namespace {

cudaStream_t s_of(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

// Whether a grid-stride loop over n elements can count in 32 bits (its index
// reaches n plus the grid's size).
bool fits_32_bits(std::size_t n) {
  return n + static_cast<std::size_t>(elementwise_blocks(n)) * kElementwiseThreads <= UINT32_MAX;
}

// bn_relu_output_sign of 8 consecutive channels c0 ... c0 + 7 of a row, from x.
template <typename T>
__device__ __forceinline__ void output_signs8(const float (&xs)[kVector8], std::size_t c0,
                                              const float* mean, const float* invstd,
                                              const float* gamma, const float* beta,
                                              float (&ys)[kVector8]) {
#pragma unroll
  for (unsigned k = 0; k < kVector8; ++k) {
    const std::size_t ch = c0 + k;
    ys[k] = bn_relu_output_sign(static_cast<const T*>(nullptr), 0, xs[k], mean[ch], invstd[ch],
                                gamma, beta, static_cast<int>(ch));
  }
}

// Backward's sums of the masked dy and of masked dy * xhat (as
// kernels/batch_norm.cu's BackwardValue of relu's stored dx); the masked dy
// (the sums' first value) also stored into d_residual (R: T or fp32) where it
// is not null, by emit: the reduction takes each element once. With y null
// the mask comes from x again (bn_relu_output_sign); kAddend: dy is dy +
// addend (summed_dy: the output's gradient in two terms), a template
// argument so that the kernels without one hold no registers for it.
template <typename T, typename R, bool kAddend>
struct MaskedBackwardValue {
  const T* x;
  const T* y;
  const T* dy;
  const T* addend;
  const float* mean;
  const float* invstd;
  const float* gamma;
  const float* beta;
  R* d_residual;
  __device__ Sums<2> operator()(std::size_t a, std::size_t c) const {
    const float xv = load(x, a);
    float d = load(dy, a);
    if constexpr (kAddend) d = summed_dy<T>(d, load(addend, a));
    const float g = bn_relu_masked_dy(
        bn_relu_output_sign(y, a, xv, mean[c], invstd[c], gamma, beta, static_cast<int>(c)), d);
    return {{g, bn_dy_xhat(g, xv, mean[c], invstd[c])}};
  }
  __device__ void emit(std::size_t a, const Sums<2>& v) const {
    if (d_residual != nullptr) store(d_residual, a, v.v[0]);
  }
  __device__ void emit8(std::size_t a, const Sums<2> (&v)[kVector8]) const {
    if (d_residual == nullptr) return;
    float g[kVector8];
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) g[k] = v[k].v[0];
    store8(d_residual, a, g);
  }
  bool rows8_aligned() const {
    return vector8_aligned(x) && (y == nullptr || vector8_aligned(y)) && vector8_aligned(dy) &&
           (!kAddend || vector8_aligned(addend)) &&
           (d_residual == nullptr || vector8_aligned(d_residual));
  }
  __device__ void values8(std::size_t a, std::size_t c0, Sums<2> (&out)[kVector8]) const {
    float ys[kVector8], ds[kVector8], xs[kVector8];
    if (y != nullptr) load8(y, a, ys);
    load8(dy, a, ds);
    if constexpr (kAddend) {
      float as[kVector8];
      load8(addend, a, as);
      add8(ds, as);
    }
    load8(x, a, xs);
    from8(xs, ys, ds, c0, out);
  }
  // 16-bit rows: four rows' bytes in flight (channel_rows8_kernel); fp32
  // ones would hold twice the registers, and keep values8's two rows.
  static constexpr int kRowsInFlight = sizeof(T) == 2 ? 4 : 2;
  struct NoAddend {};
  struct Raw {
    Raw8<T> x, y, dy;
    std::conditional_t<kAddend, Raw8<T>, NoAddend> addend;
  };
  __device__ Raw fetch8(std::size_t a) const {
    Raw raw{};  // raw.y stays zeros where y is null (the mask comes from x)
    raw.x = kernels::fetch8(x, a);
    if (y != nullptr) raw.y = kernels::fetch8(y, a);
    raw.dy = kernels::fetch8(dy, a);
    if constexpr (kAddend) raw.addend = kernels::fetch8(addend, a);
    return raw;
  }
  __device__ void values8(const Raw& raw, std::size_t c0, Sums<2> (&out)[kVector8]) const {
    float ys[kVector8], ds[kVector8], xs[kVector8];
    widen8(raw.x, xs);
    if (y != nullptr) widen8(raw.y, ys);
    widen8(raw.dy, ds);
    if constexpr (kAddend) {
      float as[kVector8];
      widen8(raw.addend, as);
      add8(ds, as);
    }
    from8(xs, ys, ds, c0, out);
  }

 private:
  // dy's two terms summed as summed_dy sums them.
  __device__ static void add8(float (&ds)[kVector8], const float (&as)[kVector8]) {
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) ds[k] = summed_dy<T>(ds[k], as[k]);
  }
  // The sums' values from a row's x, y (computed again from x where y is
  // null) and dy.
  __device__ void from8(const float (&xs)[kVector8], float (&ys)[kVector8],
                        const float (&ds)[kVector8], std::size_t c0,
                        Sums<2> (&out)[kVector8]) const {
    if (y == nullptr) output_signs8<T>(xs, c0, mean, invstd, gamma, beta, ys);
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) {
      const float g = bn_relu_masked_dy(ys[k], ds[k]);
      out[k] = {{g, bn_dy_xhat(g, xs[k], mean[c0 + k], invstd[c0 + k])}};
    }
  }
};

template <typename Index, typename ChannelOf, typename T>
__global__ void apply_kernel(const T* __restrict__ x, const T* __restrict__ residual,
                             T* __restrict__ y, Index total, ChannelOf channel_of,
                             const float* mean, const float* invstd, const float* gamma,
                             const float* beta, DType precision) {
  const bool has_residual = residual != nullptr;
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < total; i += stride) {
    const Index ch = channel_of(i);
    store(y, i,
          bn_relu_forward_element<T>(load(x, i), mean[ch], invstd[ch], gamma, beta,
                                     static_cast<int>(ch), precision, has_residual,
                                     has_residual ? load(residual, i) : 0.0f));
  }
}

template <typename Index, typename ChannelOf, typename T, typename D, typename R>
__global__ void backward_dx_kernel(const T* __restrict__ x, const T* __restrict__ y,
                                   const T* __restrict__ dy, const T* __restrict__ addend,
                                   D* __restrict__ dx, const R* __restrict__ d_residual,
                                   Index total, Index c, ChannelOf channel_of,
                                   const float* count_ptr, const float* mean, const float* invstd,
                                   const float* gamma, const float* beta, const float* sums,
                                   DType precision) {
  const float count = *count_ptr;
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < total; i += stride) {
    const Index ch = channel_of(i);
    const float xv = load(x, i);
    // The masked dy: as the reduction stored it (exactly: dy or 0), or again.
    const float m =
        d_residual != nullptr
            ? load(d_residual, i)
            : bn_relu_masked_dy(
                  bn_relu_output_sign(y, i, xv, mean[ch], invstd[ch], gamma, beta,
                                      static_cast<int>(ch)),
                  addend != nullptr ? summed_dy<T>(load(dy, i), load(addend, i)) : load(dy, i));
    store(dx, i,
          round_to_precision_grid(
              bn_backward_element(xv, m, mean[ch], invstd[ch], gamma != nullptr ? gamma[ch] : 1.0f,
                                  sums[ch], sums[c + ch], count),
              precision));
  }
}

// Rows of channels (NHWC, inner 1) with 8 | C and 16-byte aligned buffers:
// a thread takes 8 consecutive channels of a row (one 16-byte access per
// 16-bit buffer, two per fp32 one) where the kernels above take one element
// (2 bytes) each. The same element functions on the same values: the same
// bits.
template <typename T>
__global__ void apply_rows8_kernel(const T* __restrict__ x, const T* __restrict__ residual,
                                   T* __restrict__ y, std::uint32_t vectors, std::uint32_t groups,
                                   const float* mean, const float* invstd, const float* gamma,
                                   const float* beta, DType precision) {
  const bool has_residual = residual != nullptr;
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += stride) {
    const std::uint32_t c0 = (v % groups) * kVector8;
    float xs[kVector8], rs[kVector8] = {}, ys[kVector8];
    load8(x, std::size_t{v} * kVector8, xs);
    if (has_residual) load8(residual, std::size_t{v} * kVector8, rs);
#pragma unroll
    for (std::uint32_t k = 0; k < kVector8; ++k) {
      const std::uint32_t ch = c0 + k;
      ys[k] = bn_relu_forward_element<T>(xs[k], mean[ch], invstd[ch], gamma, beta,
                                         static_cast<int>(ch), precision, has_residual, rs[k]);
    }
    store8(y, std::size_t{v} * kVector8, ys);
  }
}

template <typename T, typename D, typename R>
__global__ void backward_dx_rows8_kernel(const T* __restrict__ x, const T* __restrict__ y,
                                         const T* __restrict__ dy, const T* __restrict__ addend,
                                         D* __restrict__ dx, const R* __restrict__ d_residual,
                                         std::uint32_t vectors, std::uint32_t groups,
                                         std::uint32_t c, const float* count_ptr, const float* mean,
                                         const float* invstd, const float* gamma, const float* beta,
                                         const float* sums, DType precision) {
  const float count = *count_ptr;
  const std::uint32_t stride = gridDim.x * blockDim.x;
  for (std::uint32_t v = blockIdx.x * blockDim.x + threadIdx.x; v < vectors; v += stride) {
    const std::uint32_t c0 = (v % groups) * kVector8;
    const std::size_t first = std::size_t{v} * kVector8;
    float m[kVector8], xs[kVector8], out[kVector8];
    load8(x, first, xs);
    if (d_residual != nullptr) {  // the masked dy, as the reduction stored it
      load8(d_residual, first, m);
    } else {
      float ys[kVector8], dys[kVector8];
      if (y != nullptr) load8(y, first, ys);
      load8(dy, first, dys);
      if (addend != nullptr) {
        float as[kVector8];
        load8(addend, first, as);
#pragma unroll
        for (std::uint32_t k = 0; k < kVector8; ++k) dys[k] = summed_dy<T>(dys[k], as[k]);
      }
      if (y == nullptr) output_signs8<T>(xs, c0, mean, invstd, gamma, beta, ys);
#pragma unroll
      for (std::uint32_t k = 0; k < kVector8; ++k) m[k] = bn_relu_masked_dy(ys[k], dys[k]);
    }
#pragma unroll
    for (std::uint32_t k = 0; k < kVector8; ++k) {
      const std::uint32_t ch = c0 + k;
      out[k] = round_to_precision_grid(
          bn_backward_element(xs[k], m[k], mean[ch], invstd[ch],
                              gamma != nullptr ? gamma[ch] : 1.0f, sums[ch], sums[c + ch], count),
          precision);
    }
    store8(dx, first, out);
  }
}

// Whether the rows kernels' vectors fit: rows of channels (hw 1), 8 | c, and
// every buffer (null ones aside) 16-byte aligned.
template <typename... P>
bool rows8_fit(std::size_t c, std::size_t hw, std::size_t total, const P*... buffers) {
  return hw == 1 && c % kVector8 == 0 && fits_32_bits(total) &&
         ((buffers == nullptr || vector8_aligned(buffers)) && ...);
}

}  // namespace

void batch_norm_relu_apply_cuda(const void* x, const void* residual, void* y, DType t,
                                std::size_t n, std::size_t c, std::size_t hw, const float* mean,
                                const float* invstd, const float* gamma, const float* beta,
                                DType precision, void* stream) {
  const std::size_t total = n * c * hw;
  if (total == 0) return;
  const auto blocks = elementwise_blocks(total);
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    const auto* xs = static_cast<const T*>(x);
    const auto* rs = static_cast<const T*>(residual);
    auto* ys = static_cast<T*>(y);
    if (rows8_fit(c, hw, total, xs, rs, ys)) {
      const auto vectors = static_cast<std::uint32_t>(total / kVector8);
      apply_rows8_kernel<T><<<elementwise_blocks(vectors), kElementwiseThreads, 0, s_of(stream)>>>(
          xs, rs, ys, vectors, static_cast<std::uint32_t>(c / kVector8), mean, invstd, gamma, beta,
          precision);
    } else if (fits_32_bits(total))
      apply_kernel<std::uint32_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
          xs, rs, ys, static_cast<std::uint32_t>(total),
          ChannelOf32(static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(hw)), mean, invstd,
          gamma, beta, precision);
    else
      apply_kernel<std::size_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
          xs, rs, ys, total, ChannelOfWide{c, hw}, mean, invstd, gamma, beta, precision);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_relu_backward_reduce_cuda(
    const void* x, const void* y, const void* dy, const void* dy_addend, DType t, void* d_residual,
    DType residual_type, std::size_t n, std::size_t c, std::size_t hw, const float* mean,
    const float* invstd, const float* gamma, const float* beta, float* sums, float* dgamma,
    float* dbeta, bool accumulate, float* scratch, std::size_t scratch_floats, void* stream) {
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    // An absent d_residual takes T: two instantiations, not three.
    with_storage_or_f32<T>(d_residual != nullptr ? residual_type : t, [&](auto r) {
      using R = decltype(r);
      const auto reduce = [&](auto value) {
        reduce_channels<2>(n, c, hw, value, BnBackwardFinish{sums, c, dgamma, dbeta, accumulate},
                           scratch, scratch_floats, stream);
      };
      const auto* xs = static_cast<const T*>(x);
      const auto* ys = static_cast<const T*>(y);
      const auto* dys = static_cast<const T*>(dy);
      const auto* as = static_cast<const T*>(dy_addend);
      auto* rs = static_cast<R*>(d_residual);
      if (as != nullptr)
        reduce(MaskedBackwardValue<T, R, true>{xs, ys, dys, as, mean, invstd, gamma, beta, rs});
      else
        reduce(MaskedBackwardValue<T, R, false>{xs, ys, dys, as, mean, invstd, gamma, beta, rs});
    });
  });
}

void batch_norm_relu_backward_dx_cuda(const void* x, const void* y, const void* dy,
                                      const void* dy_addend, DType t, void* dx, DType dx_type,
                                      const void* d_residual, DType residual_type, std::size_t n,
                                      std::size_t c, std::size_t hw, const float* mean,
                                      const float* invstd, const float* gamma, const float* beta,
                                      const float* sums, const float* count_ptr, DType precision,
                                      void* stream) {
  const std::size_t total = n * c * hw;
  // d_residual was written by the reduction: without dx there is nothing left.
  if (total == 0 || dx == nullptr) return;
  const auto blocks = elementwise_blocks(total);
  // An absent d_residual takes t's type: two instantiations (T or fp32).
  if (d_residual == nullptr) residual_type = t;
  with_storage_pair(t, dx_type, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    with_storage_or_f32<T>(residual_type, [&](auto r) {
      using R = decltype(r);
      const auto* xs = static_cast<const T*>(x);
      const auto* ys = static_cast<const T*>(y);
      const auto* dys = static_cast<const T*>(dy);
      // Only the masked dy computed here reads the addend: with d_residual
      // the reduction summed it already.
      const auto* as = d_residual == nullptr ? static_cast<const T*>(dy_addend) : nullptr;
      auto* dxs = static_cast<D*>(dx);
      const auto* rs = static_cast<const R*>(d_residual);
      if (rows8_fit(c, hw, total, xs, ys, dys, as, dxs, rs)) {
        const auto vectors = static_cast<std::uint32_t>(total / kVector8);
        backward_dx_rows8_kernel<T>
            <<<elementwise_blocks(vectors), kElementwiseThreads, 0, s_of(stream)>>>(
                xs, ys, dys, as, dxs, rs, vectors, static_cast<std::uint32_t>(c / kVector8),
                static_cast<std::uint32_t>(c), count_ptr, mean, invstd, gamma, beta, sums,
                precision);
      } else if (fits_32_bits(total))
        backward_dx_kernel<std::uint32_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
            xs, ys, dys, as, dxs, rs, static_cast<std::uint32_t>(total),
            static_cast<std::uint32_t>(c),
            ChannelOf32(static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(hw)), count_ptr,
            mean, invstd, gamma, beta, sums, precision);
      else
        backward_dx_kernel<std::size_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
            xs, ys, dys, as, dxs, rs, total, c, ChannelOfWide{c, hw}, count_ptr, mean, invstd,
            gamma, beta, sums, precision);
    });
  });
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
