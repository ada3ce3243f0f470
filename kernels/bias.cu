// Bias forward and backward on a GPU.
//
// Forward: an elementwise add (grid-stride; 32-bit index arithmetic without a
// division when the element count allows, kernels/fast_divide.cuh). Fusing it into the producer
// instead (a cuBLASLt CUBLASLT_EPILOGUE_BIAS for Linear, cuDNN's conv-bias-activation for Conv2d)
// saves one pass over the output, a few microseconds for these models, at the
// price of a second GEMM path with its own plans and heuristics beside
// cublasSgemm; not worth it until a profile says so.
//
// Backward: our own two-pass reduction rather than the libraries. cuBLAS GEMV
// with a ones vector (dbias = dy^T 1) would be as fast for Linear, but under
// --tf32 on cuBLAS may round dy to TF32 and it needs a ones vector per batch
// size; cudnnConvolutionBackwardBias is legacy API with no determinism
// promise. kernels/channel_reduce.cuh covers both layouts with one scheme
// (split by kernels/bias.cuh): thread blocks over (channel group, row slice),
// each summing in a fixed order, then an ordered sum of the slices' partials.
// No float atomics, so the gradient is bit-for-bit repeatable. Enough blocks for
// the whole GPU: e.g. a conv with 32 channels at batch 512 of 28x28 maps (12.8
// M floats) runs as 32 x 16 blocks, where one block per channel would leave
// most multiprocessors idle.
#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/bias.cuh"
#include "kernels/bias.h"
#include "kernels/bias_launch.cuh"
#include "kernels/channel_reduce.cuh"
#include "kernels/fast_divide.cuh"
#include "kernels/launch_shape.cuh"
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

namespace {

// x + bias, loaded to fp32, y stored once (kernels/bias.cuh's arithmetic).
struct BiasAdd {
  __device__ float operator()(float x, float b) const { return bias_add_element(x, b); }
};

// The bias gradient as a channel reduction (kernels/channel_reduce.cuh).
template <typename T>
struct DyValue {
  const T* dy;
  __device__ Sums<1> operator()(std::size_t a, std::size_t) const { return {{load(dy, a)}}; }
  bool rows8_aligned() const { return vector8_aligned(dy); }
  __device__ void values8(std::size_t a, std::size_t, Sums<1> (&out)[kVector8]) const {
    float gs[kVector8];
    load8(dy, a, gs);
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) out[k] = {{gs[k]}};
  }
};

}  // namespace

void bias_add_cuda(const void* x, DType x_type, void* y, DType t, const float* bias,
                   std::size_t outer, std::size_t channels, std::size_t inner, void* stream) {
  launch_bias_elementwise(x, x_type, y, t, bias, outer, channels, inner, stream, BiasAdd{});
}

void bias_grad_cuda(const void* dy, DType t, float* dbias, std::size_t outer, std::size_t channels,
                    std::size_t inner, bool accumulate, float* scratch, std::size_t scratch_floats,
                    void* stream) {
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    reduce_channels<1>(outer, channels, inner, DyValue<T>{static_cast<const T*>(dy)},
                       BiasGradFinish{dbias, accumulate}, scratch, scratch_floats, stream);
  });
}

}  // namespace ringtrain::kernels
