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

// One value's conversion, the precision fixed at compile time.
template <DType P>
struct RoundOp {
  __device__ float operator()(float x) const { return round_to_precision_grid(x, P); }
};
template <DType P>
struct ToBitsOp {
  __device__ std::uint16_t operator()(float x) const { return to_precision_bits(x, P); }
};
template <DType P>
struct FromBitsOp {
  __device__ float operator()(std::uint16_t b) const { return from_precision_bits(b, P); }
};

// Group i of four values as one 16-byte (float) or 8-byte (16-bit) access.
__device__ __forceinline__ void load4(const float* p, std::size_t i, float v[4]) {
  const float4 q = reinterpret_cast<const float4*>(p)[i];
  v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
__device__ __forceinline__ void load4(const std::uint16_t* p, std::size_t i, std::uint16_t v[4]) {
  const ushort4 q = reinterpret_cast<const ushort4*>(p)[i];
  v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
}
__device__ __forceinline__ void store4(float* p, std::size_t i, const float v[4]) {
  reinterpret_cast<float4*>(p)[i] = make_float4(v[0], v[1], v[2], v[3]);
}
__device__ __forceinline__ void store4(std::uint16_t* p, std::size_t i, const std::uint16_t v[4]) {
  reinterpret_cast<ushort4*>(p)[i] = make_ushort4(v[0], v[1], v[2], v[3]);
}

// The grid-stride walk of the kernels below: group(i) for the groups of four
// [0, n / 4) when `vector` (the pointers are aligned for four-value
// accesses), then one(i) for the elements after them.
template <typename Group, typename One>
__device__ __forceinline__ void walk_groups(std::size_t n, bool vector, Group group, One one) {
  const std::size_t first = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  std::size_t done = 0;
  if (vector) {
    const std::size_t groups = n / 4;
    for (std::size_t i = first; i < groups; i += stride) group(i);
    done = groups * 4;
  }
  for (std::size_t i = done + first; i < n; i += stride) one(i);
}

// y[i] = op(x[i]). y may be x (each thread reads a group before it writes it).
template <typename In, typename Out, typename Op>
__global__ void convert_kernel(Out* y, const In* x, std::size_t n, bool vector, Op op) {
  walk_groups(
      n, vector,
      [&](std::size_t i) {
        In v[4];
        Out o[4];
        load4(x, i, v);
        for (int k = 0; k < 4; ++k) o[k] = op(v[k]);
        store4(y, i, o);
      },
      [&](std::size_t i) { y[i] = op(x[i]); });
}

bool aligned(const void* p, std::size_t bytes) {
  return reinterpret_cast<std::uintptr_t>(p) % bytes == 0;
}

// y[i] = op(x[i]) for i < n on `stream`, four at a time where both pointers
// are aligned for a four-value access.
template <typename In, typename Out, typename Op>
void convert(Out* y, const In* x, std::size_t n, void* stream, Op op) {
  const bool vector = aligned(x, 4 * sizeof(In)) && aligned(y, 4 * sizeof(Out));
  const unsigned blocks = optim_blocks((n + 3) / 4);  // optim_launch.cuh's cap
  convert_kernel<<<blocks, kOptimThreads, 0, static_cast<cudaStream_t>(stream)>>>(y, x, n, vector,
                                                                                  op);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void round_to_precision_cuda(float* y, const float* x, std::size_t n, DType precision,
                             void* stream) {
  if (n == 0 || (precision == DType::f32 && y == x)) return;
  if (precision == DType::bf16)
    convert(y, x, n, stream, RoundOp<DType::bf16>{});
  else if (precision == DType::f16)
    convert(y, x, n, stream, RoundOp<DType::f16>{});
  else
    convert(y, x, n, stream, RoundOp<DType::f32>{});
}

void to_precision_bits_cuda(std::uint16_t* y, const float* x, std::size_t n, DType precision,
                            void* stream) {
  if (n == 0) return;
  if (precision == DType::f16)
    convert(y, x, n, stream, ToBitsOp<DType::f16>{});
  else
    convert(y, x, n, stream, ToBitsOp<DType::bf16>{});
}

void from_precision_bits_cuda(float* y, const std::uint16_t* x, std::size_t n, DType precision,
                              void* stream) {
  if (n == 0) return;
  if (precision == DType::f16)
    convert(y, x, n, stream, FromBitsOp<DType::f16>{});
  else
    convert(y, x, n, stream, FromBitsOp<DType::bf16>{});
}

}  // namespace ringtrain::kernels
