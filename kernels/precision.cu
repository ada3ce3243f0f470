// Rounding to the bf16/fp16 grid on the GPU, and the 16-bit copies the
// tensor-core paths read and write, arithmetic from precision.cuh.
//
// Each thread moves four values at a time where the pointers allow (16-byte
// float4 and 8-byte ushort4 accesses; the model's buffers and the context's
// scratch are allocated aligned, a GEMM operand inside a flat buffer may not
// be), then the first threads take the tail. These casts move whole
// activations: a convolution's input and output under --precision bf16 each
// pass through one, so they run at the memory's speed or they cost the step
// (round 5, docs/gpu.md). One value a thread with a 64-bit index kept too few
// loads in flight. The precision is a template argument: no branch per value.
#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/optim_launch.cuh"
#include "kernels/precision.cuh"
#include "kernels/precision.h"

namespace ringtrain::kernels {

namespace {

template <int P>
__device__ __forceinline__ float round_value(float x) {
  return round_to_precision_grid(x, P);
}
template <int P>
__device__ __forceinline__ std::uint16_t bits_of(float x) {
  return to_precision_bits(x, P);
}
template <int P>
__device__ __forceinline__ float value_of(std::uint16_t b) {
  return from_precision_bits(b, P);
}

// n4 groups of four through vector accesses, then elements [4 n4, n) one by one.
template <int P>
__global__ void round_to_precision_kernel(float* y, const float* x, std::size_t n, bool vector) {
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t done = 0;
  if (vector) {
    const std::size_t n4 = n / 4;
    for (std::size_t i = first; i < n4; i += stride) {
      float4 v = reinterpret_cast<const float4*>(x)[i];
      v.x = round_value<P>(v.x), v.y = round_value<P>(v.y), v.z = round_value<P>(v.z),
      v.w = round_value<P>(v.w);
      reinterpret_cast<float4*>(y)[i] = v;
    }
    done = n4 * 4;
  }
  for (std::size_t i = done + first; i < n; i += stride) y[i] = round_value<P>(x[i]);
}

template <int P>
__global__ void to_precision_bits_kernel(std::uint16_t* __restrict__ y, const float* __restrict__ x,
                                         std::size_t n, bool vector) {
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t done = 0;
  if (vector) {
    const std::size_t n4 = n / 4;
    for (std::size_t i = first; i < n4; i += stride) {
      const float4 v = reinterpret_cast<const float4*>(x)[i];
      reinterpret_cast<ushort4*>(y)[i] =
          make_ushort4(bits_of<P>(v.x), bits_of<P>(v.y), bits_of<P>(v.z), bits_of<P>(v.w));
    }
    done = n4 * 4;
  }
  for (std::size_t i = done + first; i < n; i += stride) y[i] = bits_of<P>(x[i]);
}

template <int P>
__global__ void from_precision_bits_kernel(float* __restrict__ y,
                                           const std::uint16_t* __restrict__ x, std::size_t n,
                                           bool vector) {
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t done = 0;
  if (vector) {
    const std::size_t n4 = n / 4;
    for (std::size_t i = first; i < n4; i += stride) {
      const ushort4 b = reinterpret_cast<const ushort4*>(x)[i];
      reinterpret_cast<float4*>(y)[i] =
          make_float4(value_of<P>(b.x), value_of<P>(b.y), value_of<P>(b.z), value_of<P>(b.w));
    }
    done = n4 * 4;
  }
  for (std::size_t i = done + first; i < n; i += stride) y[i] = value_of<P>(x[i]);
}

bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// Blocks for n values moved four at a time (optim_launch.cuh's cap).
unsigned blocks_for(std::size_t n) {
  return optim_blocks((n + 3) / 4);
}

}  // namespace

void round_to_precision_cuda(float* y, const float* x, std::size_t n, int precision, void* stream) {
  if (n == 0 || (precision == kPrecisionFp32 && y == x)) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const bool vector = aligned(x, 16) && aligned(y, 16);
  if (precision == kPrecisionBf16)
    round_to_precision_kernel<kPrecisionBf16>
        <<<blocks_for(n), kOptimThreads, 0, s>>>(y, x, n, vector);
  else if (precision == kPrecisionFp16)
    round_to_precision_kernel<kPrecisionFp16>
        <<<blocks_for(n), kOptimThreads, 0, s>>>(y, x, n, vector);
  else
    round_to_precision_kernel<kPrecisionFp32>
        <<<blocks_for(n), kOptimThreads, 0, s>>>(y, x, n, vector);
  RT_CUDA_CHECK_LAUNCH();
}

void to_precision_bits_cuda(std::uint16_t* y, const float* x, std::size_t n, int precision,
                            void* stream) {
  if (n == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const bool vector = aligned(x, 16) && aligned(y, 8);
  if (precision == kPrecisionFp16)
    to_precision_bits_kernel<kPrecisionFp16>
        <<<blocks_for(n), kOptimThreads, 0, s>>>(y, x, n, vector);
  else
    to_precision_bits_kernel<kPrecisionBf16>
        <<<blocks_for(n), kOptimThreads, 0, s>>>(y, x, n, vector);
  RT_CUDA_CHECK_LAUNCH();
}

void from_precision_bits_cuda(float* y, const std::uint16_t* x, std::size_t n, int precision,
                              void* stream) {
  if (n == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const bool vector = aligned(x, 8) && aligned(y, 16);
  if (precision == kPrecisionFp16)
    from_precision_bits_kernel<kPrecisionFp16>
        <<<blocks_for(n), kOptimThreads, 0, s>>>(y, x, n, vector);
  else
    from_precision_bits_kernel<kPrecisionBf16>
        <<<blocks_for(n), kOptimThreads, 0, s>>>(y, x, n, vector);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
