#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/batch_norm.cuh"
#include "kernels/batch_norm.h"
#include "kernels/bias.cuh"
#include "kernels/fast_divide.cuh"
#include "kernels/launch_shape.cuh"

namespace ringtrain::kernels {

namespace {

// The per-channel reductions (sums of x, squared deviations, and backward's sum
// of dy and dy * xhat) over an [outer, channels, inner] tensor: NCHW is
// [N, C, H*W], NHWC [N*H*W, C, 1]. They split the work as the bias gradient
// does (kernels/bias.cuh): thread blocks over (channel group, row slice), each
// summing its part in a fixed order, then the slices' partials added in slice
// order from the context's scratch. No float atomics: bit-for-bit repeatable,
// and a function of the shape alone. One block per channel striding over
// N*H*W (what this replaced) left most of a GPU idle at 64 channels and, in
// NHWC, read every element C floats apart from its neighbour's.
template <int K>
struct Sums {
  float v[K];
};

struct XValue {  // sum of x
  const float* x;
  __device__ Sums<1> operator()(std::size_t a, std::size_t) const { return {{x[a]}}; }
};

struct SqDevValue {  // sum of (x - mean)^2
  const float* x;
  const float* mean;
  __device__ Sums<1> operator()(std::size_t a, std::size_t c) const {
    const float d = x[a] - mean[c];
    return {{d * d}};
  }
};

struct BackwardValue {  // sum of dy, and of dy * xhat
  const float* x;
  const float* dy;
  const float* mean;
  const float* invstd;
  __device__ Sums<2> operator()(std::size_t a, std::size_t c) const {
    const float g = dy[a];
    return {{g, g * (x[a] - mean[c]) * invstd[c]}};
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

struct BackwardFinish {  // sums[c] = sum(dy), sums[C + c] = sum(dy xhat); dgamma, dbeta
  float* sums;
  std::size_t channels;
  float* dgamma;
  float* dbeta;
  bool accumulate;
  __device__ void operator()(std::size_t c, const Sums<2>& t) const {
    sums[c] = t.v[0];
    sums[channels + c] = t.v[1];
    if (dgamma != nullptr) dgamma[c] = accumulate ? dgamma[c] + t.v[1] : t.v[1];
    if (dbeta != nullptr) dbeta[c] = accumulate ? dbeta[c] + t.v[0] : t.v[0];
  }
};

// inner == 1: block (channel tile, slice); thread (x, y) sums rows begin + y,
// begin + y + 8, ... of channel tile * 32 + x (a warp reads 32 consecutive
// floats of a row), then row 0 of threads adds the 8 partials in order. With
// `partial` null the block finishes its channels; else it writes
// partial[(slice * K + k) * channels + c].
template <int K, typename Value, typename Finish>
__global__ void channel_rows_kernel(std::size_t outer, std::size_t channels,
                                    std::size_t rows_per_slice, Value value, Finish finish,
                                    float* __restrict__ partial) {
  __shared__ float part[K][kBiasTileRows][kBiasTileChannels + 1];
  const std::size_t c = blockIdx.x * kBiasTileChannels + threadIdx.x;
  const std::size_t slice = blockIdx.y;
  const std::size_t begin = bias_slice_begin(slice, rows_per_slice);
  const std::size_t end = bias_slice_end(slice, rows_per_slice, outer);
  Sums<K> sum{};
  if (c < channels)
    for (std::size_t r = begin + threadIdx.y; r < end; r += kBiasTileRows) {
      const Sums<K> v = value(r * channels + c, c);
      for (int k = 0; k < K; ++k) sum.v[k] += v.v[k];
    }
  for (int k = 0; k < K; ++k) part[k][threadIdx.y][threadIdx.x] = sum.v[k];
  __syncthreads();
  if (threadIdx.y != 0 || c >= channels) return;
  for (int k = 0; k < K; ++k)
    for (unsigned j = 1; j < kBiasTileRows; ++j) sum.v[k] += part[k][j][threadIdx.x];
  if (partial == nullptr) {
    finish(c, sum);
  } else {
    for (int k = 0; k < K; ++k) partial[(slice * K + k) * channels + c] = sum.v[k];
  }
}

// inner > 1: block (channel, slice) walks the slice's rows of that channel's
// planes in memory order, blockDim.x elements apart per thread (no division
// per element), then a tree in shared memory.
template <int K, typename Value, typename Finish>
__global__ void channel_planes_kernel(std::size_t outer, std::size_t channels, std::size_t inner,
                                      std::size_t rows_per_slice, Value value, Finish finish,
                                      float* __restrict__ partial) {
  __shared__ float part[K][kBiasPlaneThreads];
  const std::size_t c = blockIdx.x;
  const std::size_t slice = blockIdx.y;
  const std::size_t end = bias_slice_end(slice, rows_per_slice, outer);
  const std::size_t step_rows = blockDim.x / inner, step_i = blockDim.x % inner;
  std::size_t o = bias_slice_begin(slice, rows_per_slice) + threadIdx.x / inner;
  std::size_t i = threadIdx.x % inner;
  Sums<K> sum{};
  while (o < end) {
    const Sums<K> v = value((o * channels + c) * inner + i, c);
    for (int k = 0; k < K; ++k) sum.v[k] += v.v[k];
    o += step_rows;
    i += step_i;
    if (i >= inner) {
      i -= inner;
      ++o;
    }
  }
  for (int k = 0; k < K; ++k) part[k][threadIdx.x] = sum.v[k];
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s)
      for (int k = 0; k < K; ++k) part[k][threadIdx.x] += part[k][threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x != 0) return;
  for (int k = 0; k < K; ++k) sum.v[k] = part[k][0];
  if (partial == nullptr) {
    finish(c, sum);
  } else {
    for (int k = 0; k < K; ++k) partial[(slice * K + k) * channels + c] = sum.v[k];
  }
}

// A channel's partials added in slice order, then finished.
template <int K, typename Finish>
__global__ void channel_finish_kernel(const float* __restrict__ partial, std::size_t channels,
                                      std::size_t slices, Finish finish) {
  const std::size_t c = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  Sums<K> sum{};
  for (std::size_t s = 0; s < slices; ++s)
    for (int k = 0; k < K; ++k) sum.v[k] += partial[(s * K + k) * channels + c];
  finish(c, sum);
}

cudaStream_t s_of(void* stream) {
  return static_cast<cudaStream_t>(stream);
}

template <int K, typename Value, typename Finish>
void reduce_channels(std::size_t outer, std::size_t channels, std::size_t inner, Value value,
                     Finish finish, float* scratch, std::size_t scratch_floats, void* stream) {
  if (channels == 0) return;
  if (inner == 0) {  // nothing to sum: the totals are 0
    inner = 1;
    outer = 0;
  }
  const BiasGradSplit split =
      bias_grad_split(outer, channels, inner, scratch != nullptr ? scratch_floats / K : 0);
  float* partial = split.slices == 1 ? nullptr : scratch;
  const dim3 grid(static_cast<unsigned>(split.channel_blocks), static_cast<unsigned>(split.slices));
  if (inner == 1)
    channel_rows_kernel<K><<<grid, dim3(kBiasTileChannels, kBiasTileRows), 0, s_of(stream)>>>(
        outer, channels, split.rows_per_slice, value, finish, partial);
  else
    channel_planes_kernel<K><<<grid, kBiasPlaneThreads, 0, s_of(stream)>>>(
        outer, channels, inner, split.rows_per_slice, value, finish, partial);
  RT_CUDA_CHECK_LAUNCH();
  if (partial == nullptr) return;
  constexpr unsigned kFinishThreads = 256;
  channel_finish_kernel<K>
      <<<static_cast<unsigned>((channels + kFinishThreads - 1) / kFinishThreads), kFinishThreads, 0,
         s_of(stream)>>>(partial, channels, split.slices, finish);
  RT_CUDA_CHECK_LAUNCH();
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
template <typename Index, typename ChannelOf>
__global__ void apply_kernel(const float* __restrict__ x, float* __restrict__ y, Index total,
                             ChannelOf channel_of, const float* mean, const float* invstd,
                             const float* gamma, const float* beta) {
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < total; i += stride) {
    const Index ch = channel_of(i);
    y[i] = bn_apply_element(x[i], mean[ch], invstd[ch], gamma, beta, static_cast<int>(ch));
  }
}

template <typename Index, typename ChannelOf>
__global__ void backward_dx_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                   float* __restrict__ dx, Index total, Index c,
                                   ChannelOf channel_of, const float* count_ptr, const float* mean,
                                   const float* invstd, const float* gamma, const float* sums) {
  const float count = *count_ptr;
  const Index stride = static_cast<Index>(gridDim.x) * static_cast<Index>(blockDim.x);
  for (Index i = static_cast<Index>(blockIdx.x) * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < total; i += stride) {
    const Index ch = channel_of(i);
    dx[i] = bn_backward_element(x[i], dy[i], mean[ch], invstd[ch],
                                gamma != nullptr ? gamma[ch] : 1.0f, sums[ch], sums[c + ch], count);
  }
}

// Whether a grid-stride loop over n elements can count in 32 bits (its index
// reaches n plus the grid's size).
bool fits_32_bits(std::size_t n) {
  return n + static_cast<std::size_t>(elementwise_blocks(n)) * kElementwiseThreads <= UINT32_MAX;
}

__global__ void gap_forward_kernel(const float* __restrict__ x, float* __restrict__ y,
                                   std::size_t planes, std::size_t hw) {
  for (std::size_t p = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; p < planes;
       p += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    for (std::size_t i = 0; i < hw; ++i) acc += x[p * hw + i];
    y[p] = acc / static_cast<float>(hw);
  }
}

__global__ void gap_backward_kernel(const float* __restrict__ dy, float* __restrict__ dx,
                                    std::size_t total, std::size_t hw) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dx[i] = dy[i / hw] / static_cast<float>(hw);
}

unsigned per_channel_blocks(std::size_t c) {
  return static_cast<unsigned>((c + 255) / 256);
}

}  // namespace

void batch_norm_sums_cuda(const float* x, std::size_t n, std::size_t c, std::size_t hw, float* sums,
                          float* scratch, std::size_t scratch_floats, void* stream) {
  reduce_channels<1>(n, c, hw, XValue{x}, SumsFinish{sums, c, static_cast<float>(n * hw)}, scratch,
                     scratch_floats, stream);
}

void batch_norm_mean_cuda(const float* sums, std::size_t c, float* mean, float* count_keep,
                          void* stream) {
  if (c == 0) return;
  mean_kernel<<<per_channel_blocks(c), 256, 0, s_of(stream)>>>(sums, c, mean, count_keep);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_sqdev_cuda(const float* x, std::size_t n, std::size_t c, std::size_t hw,
                           const float* mean, float* out, float* scratch,
                           std::size_t scratch_floats, void* stream) {
  reduce_channels<1>(n, c, hw, SqDevValue{x, mean}, StoreFinish{out}, scratch, scratch_floats,
                     stream);
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

void batch_norm_apply_cuda(const float* x, float* y, std::size_t n, std::size_t c, std::size_t hw,
                           const float* mean, const float* invstd, const float* gamma,
                           const float* beta, void* stream) {
  const std::size_t total = n * c * hw;
  if (total == 0) return;
  const auto blocks = elementwise_blocks(total);
  if (fits_32_bits(total))
    apply_kernel<std::uint32_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
        x, y, static_cast<std::uint32_t>(total),
        ChannelOf32(static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(hw)), mean, invstd,
        gamma, beta);
  else
    apply_kernel<std::size_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
        x, y, total, ChannelOfWide{c, hw}, mean, invstd, gamma, beta);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_backward_reduce_cuda(const float* x, const float* dy, std::size_t n, std::size_t c,
                                     std::size_t hw, const float* mean, const float* invstd,
                                     float* sums, float* dgamma, float* dbeta, bool accumulate,
                                     float* scratch, std::size_t scratch_floats, void* stream) {
  reduce_channels<2>(n, c, hw, BackwardValue{x, dy, mean, invstd},
                     BackwardFinish{sums, c, dgamma, dbeta, accumulate}, scratch, scratch_floats,
                     stream);
}

void batch_norm_backward_dx_cuda(const float* x, const float* dy, float* dx, std::size_t n,
                                 std::size_t c, std::size_t hw, const float* mean,
                                 const float* invstd, const float* gamma, const float* sums,
                                 const float* count_ptr, void* stream) {
  const std::size_t total = n * c * hw;
  if (total == 0) return;
  const auto blocks = elementwise_blocks(total);
  if (fits_32_bits(total))
    backward_dx_kernel<std::uint32_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
        x, dy, dx, static_cast<std::uint32_t>(total), static_cast<std::uint32_t>(c),
        ChannelOf32(static_cast<std::uint32_t>(c), static_cast<std::uint32_t>(hw)), count_ptr, mean,
        invstd, gamma, sums);
  else
    backward_dx_kernel<std::size_t><<<blocks, kElementwiseThreads, 0, s_of(stream)>>>(
        x, dy, dx, total, c, ChannelOfWide{c, hw}, count_ptr, mean, invstd, gamma, sums);
  RT_CUDA_CHECK_LAUNCH();
}

void global_avg_pool_forward_cuda(const float* x, float* y, std::size_t planes, std::size_t hw,
                                  void* stream) {
  if (planes == 0) return;
  gap_forward_kernel<<<elementwise_blocks(planes), kElementwiseThreads, 0, s_of(stream)>>>(
      x, y, planes, hw);
  RT_CUDA_CHECK_LAUNCH();
}

void global_avg_pool_backward_cuda(const float* dy, float* dx, std::size_t planes, std::size_t hw,
                                   void* stream) {
  const std::size_t total = planes * hw;
  if (total == 0) return;
  gap_backward_kernel<<<elementwise_blocks(total), kElementwiseThreads, 0, s_of(stream)>>>(
      dy, dx, total, hw);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
