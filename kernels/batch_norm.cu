#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/batch_norm.cuh"
#include "kernels/batch_norm.h"
#include "kernels/channel_reduce.cuh"
#include "kernels/fast_divide.cuh"
#include "kernels/launch_shape.cuh"
#include "kernels/precision.cuh"
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

namespace {

// BatchNorm's reductions (kernels/channel_reduce.cuh): the sums of x, of the
// squared deviations, and backward's sums of dy and dy * xhat.
// x and dy are of the storage type T (kernels/storage.cuh), summed in fp32.
template <typename T>
struct XValue {  // sum of x
  const T* x;
  __device__ Sums<1> operator()(std::size_t a, std::size_t) const { return {{load(x, a)}}; }
};

template <typename T>
struct SqDevValue {  // sum of (x - mean)^2
  const T* x;
  const float* mean;
  __device__ Sums<1> operator()(std::size_t a, std::size_t c) const {
    const float d = load(x, a) - mean[c];
    return {{d * d}};
  }
};

template <typename T>
struct BackwardValue {  // sum of dy, and of dy * xhat
  const T* x;
  const T* dy;
  const float* mean;
  const float* invstd;
  __device__ Sums<2> operator()(std::size_t a, std::size_t c) const {
    const float g = load(dy, a);
    return {{g, g * (load(x, a) - mean[c]) * invstd[c]}};
  }
};

// What a channel's totals become.
struct SumsFinish {  // sums[c]; sums[channels] = the sample count
  float* sums;
  std::size_t channels;
  float count;
  __device__ void operator()(std::size_t c, const Sums<1>& t) const {
    sums[c] = t.v[0];
    if (c == 0) sums[channels] = count;
  }
};

struct StoreFinish {
  float* out;
  __device__ void operator()(std::size_t c, const Sums<1>& t) const { out[c] = t.v[0]; }
};

cudaStream_t s_of(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

__global__ void mean_kernel(const float* sums, std::size_t c, float* mean, float* count_keep) {
  const std::size_t ch = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (ch < c) mean[ch] = sums[ch] / sums[c];
  if (ch == 0) *count_keep = sums[c];
}

__global__ void finalize_kernel(const float* sqdev, const float* count_ptr, std::size_t c,
                                float eps, float momentum, bool update_running, const float* mean,
                                float* invstd, float* running_mean, float* running_var) {
  const std::size_t ch = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (ch >= c) return;
  const float count = *count_ptr;
  const float var = sqdev[ch] / count;
  invstd[ch] = bn_invstd(var, eps);
  if (update_running) {
    running_mean[ch] = bn_running_mean(running_mean[ch], mean[ch], momentum);
    running_var[ch] = bn_running_var(running_var[ch], var, count, momentum);
  }
}

__global__ void eval_stats_kernel(const float* running_mean, const float* running_var,
                                  std::size_t c, float eps, float* mean, float* invstd) {
  const std::size_t ch = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (ch < c) {
    mean[ch] = running_mean[ch];
    invstd[ch] = bn_invstd(running_var[ch], eps);
  }
}

// The elementwise passes: 32-bit indices and no division where the element
// count allows (kernels/fast_divide.cuh; a 64-bit division per element made
// these memory-bound kernels compute-bound).
// x and y of the storage type T; precision: the grid an fp32 y is rounded to
// (a 16-bit T rounds as it stores).
template <typename Index, typename ChannelOf, typename T>
__global__ void apply_kernel(const T* __restrict__ x, T* __restrict__ y, Index total,
                             ChannelOf channel_of, const float* mean, const float* invstd,
                             const float* gamma, const float* beta, DType precision) {
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < total; i += stride) {
    const Index ch = channel_of(i);
    store(y, i,
          round_to_precision_grid(
              bn_apply_element(load(x, i), mean[ch], invstd[ch], gamma, beta, static_cast<int>(ch)),
              precision));
  }
}

// x and dy of the storage type T, dx of D (T, or fp32 where the model sums).
template <typename Index, typename ChannelOf, typename T, typename D>
__global__ void backward_dx_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                   D* __restrict__ dx, Index total, Index c, ChannelOf channel_of,
                                   const float* count_ptr, const float* mean, const float* invstd,
                                   const float* gamma, const float* sums, DType precision) {
  const float count = *count_ptr;
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < total; i += stride) {
    const Index ch = channel_of(i);
    store(dx, i,
          round_to_precision_grid(bn_backward_element(load(x, i), load(dy, i), mean[ch], invstd[ch],
                                                      gamma != nullptr ? gamma[ch] : 1.0f, sums[ch],
                                                      sums[c + ch], count),
                                  precision));
  }
}

// Whether a grid-stride loop over n elements can count in 32 bits (its index
// reaches n plus the grid's size).
bool fits_32_bits(std::size_t n) {
  return n + static_cast<std::size_t>(elementwise_blocks(n)) * kElementwiseThreads <= UINT32_MAX;
}

template <typename T>
__global__ void gap_forward_kernel(const T* __restrict__ x, T* __restrict__ y, std::size_t planes,
                                   std::size_t hw) {
  for (std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; p < planes;
       p += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    for (std::size_t i = 0; i < hw; ++i) acc += load(x, p * hw + i);
    store(y, p, acc / static_cast<float>(hw));
  }
}

template <typename T, typename D>
__global__ void gap_backward_kernel(const T* __restrict__ dy, D* __restrict__ dx, std::size_t total,
                                    std::size_t hw) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    store(dx, i, load(dy, i / hw) / static_cast<float>(hw));
}

unsigned per_channel_blocks(std::size_t c) {
  return static_cast<unsigned>((c + 255) / 256);
}

}  // namespace

void batch_norm_sums_cuda(const void* x, DType t, std::size_t n, std::size_t c, std::size_t hw,
                          float* sums, float* scratch, std::size_t scratch_floats, void* stream) {
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    reduce_channels<1>(n, c, hw, XValue<T>{static_cast<const T*>(x)},
                       SumsFinish{sums, c, static_cast<float>(n * hw)}, scratch, scratch_floats,
                       stream);
  });
}

void batch_norm_mean_cuda(const float* sums, std::size_t c, float* mean, float* count_keep,
                          void* stream) {
  if (c == 0) return;
  mean_kernel<<<per_channel_blocks(c), 256, 0, s_of(stream)>>>(sums, c, mean, count_keep);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_sqdev_cuda(const void* x, DType t, std::size_t n, std::size_t c, std::size_t hw,
                           const float* mean, float* out, float* scratch,
                           std::size_t scratch_floats, void* stream) {
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    reduce_channels<1>(n, c, hw, SqDevValue<T>{static_cast<const T*>(x), mean}, StoreFinish{out},
                       scratch, scratch_floats, stream);
  });
}

void batch_norm_finalize_cuda(const float* sqdev, const float* count_ptr, std::size_t c, float eps,
                              float momentum, bool update_running, const float* mean, float* invstd,
                              float* running_mean, float* running_var, void* stream) {
  if (c == 0) return;
  finalize_kernel<<<per_channel_blocks(c), 256, 0, s_of(stream)>>>(
      sqdev, count_ptr, c, eps, momentum, update_running, mean, invstd, running_mean, running_var);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_eval_stats_cuda(const float* running_mean, const float* running_var, std::size_t c,
                                float eps, float* mean, float* invstd, void* stream) {
  if (c == 0) return;
  eval_stats_kernel<<<per_channel_blocks(c), 256, 0, s_of(stream)>>>(running_mean, running_var, c,
                                                                     eps, mean, invstd);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_apply_cuda(const void* x, void* y, DType t, std::size_t n, std::size_t c,
                           std::size_t hw, const float* mean, const float* invstd,
                           const float* gamma, const float* beta, DType precision, void* stream) {
  const std::size_t total = n * c * hw;
  if (total == 0) return;
  const auto blocks = elementwise_blocks(total);
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    const auto* xs = static_cast<const T*>(x);
    auto* ys = static_cast<T*>(y);
    if (fits_32_bits(total))
      apply_kernel<std::uint32_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
          xs, ys, static_cast<std::uint32_t>(total),
          ChannelOf32(static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(hw)), mean, invstd,
          gamma, beta, precision);
    else
      apply_kernel<std::size_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
          xs, ys, total, ChannelOfWide{c, hw}, mean, invstd, gamma, beta, precision);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_backward_reduce_cuda(const void* x, const void* dy, DType t, std::size_t n,
                                     std::size_t c, std::size_t hw, const float* mean,
                                     const float* invstd, float* sums, float* dgamma, float* dbeta,
                                     bool accumulate, float* scratch, std::size_t scratch_floats,
                                     void* stream) {
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    reduce_channels<2>(
        n, c, hw,
        BackwardValue<T>{static_cast<const T*>(x), static_cast<const T*>(dy), mean, invstd},
        BnBackwardFinish{sums, c, dgamma, dbeta, accumulate}, scratch, scratch_floats, stream);
  });
}

void batch_norm_backward_dx_cuda(const void* x, const void* dy, DType t, void* dx, DType dx_type,
                                 std::size_t n, std::size_t c, std::size_t hw, const float* mean,
                                 const float* invstd, const float* gamma, const float* sums,
                                 const float* count_ptr, DType precision, void* stream) {
  const std::size_t total = n * c * hw;
  if (total == 0) return;
  const auto blocks = elementwise_blocks(total);
  with_storage_pair(t, dx_type, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    const auto* xs = static_cast<const T*>(x);
    const auto* dys = static_cast<const T*>(dy);
    auto* dxs = static_cast<D*>(dx);
    if (fits_32_bits(total))
      backward_dx_kernel<std::uint32_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
          xs, dys, dxs, static_cast<std::uint32_t>(total), static_cast<std::uint32_t>(c),
          ChannelOf32(static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(hw)), count_ptr,
          mean, invstd, gamma, sums, precision);
    else
      backward_dx_kernel<std::size_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
          xs, dys, dxs, total, c, ChannelOfWide{c, hw}, count_ptr, mean, invstd, gamma, sums,
          precision);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void global_avg_pool_forward_cuda(const void* x, void* y, DType t, std::size_t planes,
                                  std::size_t hw, void* stream) {
  if (planes == 0) return;
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    gap_forward_kernel<<<elementwise_blocks(planes), kElementwiseThreads, 0, s_of(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), planes, hw);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void global_avg_pool_backward_cuda(const void* dy, DType t, void* dx, DType dx_type,
                                   std::size_t planes, std::size_t hw, void* stream) {
  const std::size_t total = planes * hw;
  if (total == 0) return;
  with_storage_pair(t, dx_type, [&](auto storage, auto dx_storage) {
    using T = decltype(storage);
    using D = decltype(dx_storage);
    gap_backward_kernel<<<elementwise_blocks(total), kElementwiseThreads, 0, s_of(stream)>>>(
        static_cast<const T*>(dy), static_cast<D*>(dx), total, hw);
  });
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
