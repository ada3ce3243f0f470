#include "core/cuda/check_cuda.h"
#include "kernels/batch_norm.cuh"
#include "kernels/batch_norm.h"
#include "kernels/launch_shape.cuh"

namespace ringtrain::kernels {

namespace {

constexpr int kThreads = 256;

// The block's sum of v, in a fixed tree order; every thread gets it.
__device__ float block_sum(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();
  return total;
}

__device__ std::size_t at(std::size_t i, std::size_t ch, std::size_t c, std::size_t hw) {
  return ((i / hw) * c + ch) * hw + i % hw;
}

__global__ void sums_kernel(const float* __restrict__ x, std::size_t n, std::size_t c,
                            std::size_t hw, float* sums) {
  __shared__ float shared[kThreads];
  const std::size_t ch = blockIdx.x, count = n * hw;
  float acc = 0.0f;
  for (std::size_t i = threadIdx.x; i < count; i += kThreads) acc += x[at(i, ch, c, hw)];
  const float total = block_sum(acc, shared);
  if (threadIdx.x == 0) {
    sums[ch] = total;
    if (ch == 0) sums[c] = static_cast<float>(count);
  }
}

__global__ void mean_kernel(const float* sums, std::size_t c, float* mean, float* count_keep) {
  const std::size_t ch = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (ch < c) mean[ch] = sums[ch] / sums[c];
  if (ch == 0) *count_keep = sums[c];
}

__global__ void sqdev_kernel(const float* __restrict__ x, std::size_t n, std::size_t c,
                             std::size_t hw, const float* mean, float* out) {
  __shared__ float shared[kThreads];
  const std::size_t ch = blockIdx.x, count = n * hw;
  const float m = mean[ch];
  float acc = 0.0f;
  for (std::size_t i = threadIdx.x; i < count; i += kThreads) {
    const float d = x[at(i, ch, c, hw)] - m;
    acc += d * d;
  }
  const float total = block_sum(acc, shared);
  if (threadIdx.x == 0) out[ch] = total;
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

__global__ void apply_kernel(const float* __restrict__ x, float* __restrict__ y, std::size_t total,
                             std::size_t c, std::size_t hw, const float* mean, const float* invstd,
                             const float* gamma, const float* beta) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const int ch = static_cast<int>((i / hw) % c);
    y[i] = bn_apply_element(x[i], mean[ch], invstd[ch], gamma, beta, ch);
  }
}

__global__ void backward_reduce_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                       std::size_t n, std::size_t c, std::size_t hw,
                                       const float* mean, const float* invstd, float* sums,
                                       float* dgamma, float* dbeta, bool accumulate) {
  __shared__ float shared[kThreads];
  const std::size_t ch = blockIdx.x, count = n * hw;
  const float m = mean[ch], is = invstd[ch];
  float s_dy = 0.0f, s_dy_xhat = 0.0f;
  for (std::size_t i = threadIdx.x; i < count; i += kThreads) {
    const std::size_t a = at(i, ch, c, hw);
    s_dy += dy[a];
    s_dy_xhat += dy[a] * (x[a] - m) * is;
  }
  const float sum_dy = block_sum(s_dy, shared);
  const float sum_dy_xhat = block_sum(s_dy_xhat, shared);
  if (threadIdx.x == 0) {
    sums[ch] = sum_dy;
    sums[c + ch] = sum_dy_xhat;
    if (dgamma != nullptr) dgamma[ch] = accumulate ? dgamma[ch] + sum_dy_xhat : sum_dy_xhat;
    if (dbeta != nullptr) dbeta[ch] = accumulate ? dbeta[ch] + sum_dy : sum_dy;
  }
}

__global__ void backward_dx_kernel(const float* __restrict__ x, const float* __restrict__ dy,
                                   float* __restrict__ dx, std::size_t total, std::size_t c,
                                   std::size_t hw, const float* count_ptr, const float* mean,
                                   const float* invstd, const float* gamma, const float* sums) {
  const float count = *count_ptr;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t ch = (i / hw) % c;
    dx[i] = bn_backward_element(x[i], dy[i], mean[ch], invstd[ch],
                                gamma != nullptr ? gamma[ch] : 1.0f, sums[ch], sums[c + ch], count);
  }
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

cudaStream_t s_of(void* stream) {
  return static_cast<cudaStream_t>(stream);
}
unsigned per_channel_blocks(std::size_t c) {
  return static_cast<unsigned>((c + 255) / 256);
}

}  // namespace

void batch_norm_sums_cuda(const float* x, std::size_t n, std::size_t c, std::size_t hw, float* sums,
                          void* stream) {
  if (c == 0) return;
  sums_kernel<<<static_cast<unsigned>(c), kThreads, 0, s_of(stream)>>>(x, n, c, hw, sums);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_mean_cuda(const float* sums, std::size_t c, float* mean, float* count_keep,
                          void* stream) {
  if (c == 0) return;
  mean_kernel<<<per_channel_blocks(c), 256, 0, s_of(stream)>>>(sums, c, mean, count_keep);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_sqdev_cuda(const float* x, std::size_t n, std::size_t c, std::size_t hw,
                           const float* mean, float* out, void* stream) {
  if (c == 0) return;
  sqdev_kernel<<<static_cast<unsigned>(c), kThreads, 0, s_of(stream)>>>(x, n, c, hw, mean, out);
  RT_CUDA_CHECK_LAUNCH();
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
  apply_kernel<<<elementwise_blocks(total), kElementwiseThreads, 0, s_of(stream)>>>(
      x, y, total, c, hw, mean, invstd, gamma, beta);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_backward_reduce_cuda(const float* x, const float* dy, std::size_t n, std::size_t c,
                                     std::size_t hw, const float* mean, const float* invstd,
                                     float* sums, float* dgamma, float* dbeta, bool accumulate,
                                     void* stream) {
  if (c == 0) return;
  backward_reduce_kernel<<<static_cast<unsigned>(c), kThreads, 0, s_of(stream)>>>(
      x, dy, n, c, hw, mean, invstd, sums, dgamma, dbeta, accumulate);
  RT_CUDA_CHECK_LAUNCH();
}

void batch_norm_backward_dx_cuda(const float* x, const float* dy, float* dx, std::size_t n,
                                 std::size_t c, std::size_t hw, const float* mean,
                                 const float* invstd, const float* gamma, const float* sums,
                                 const float* count_ptr, void* stream) {
  const std::size_t total = n * c * hw;
  if (total == 0) return;
  backward_dx_kernel<<<elementwise_blocks(total), kElementwiseThreads, 0, s_of(stream)>>>(
      x, dy, dx, total, c, hw, count_ptr, mean, invstd, gamma, sums);
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
