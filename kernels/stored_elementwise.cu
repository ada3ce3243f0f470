#include "core/cuda/check_cuda.h"
#include "kernels/activation.cuh"
#include "kernels/axpy.cuh"
#include "kernels/launch_shape.cuh"
#include "kernels/scale.cuh"
#include "kernels/storage.cuh"
#include "kernels/stored_elementwise.h"
#include "kernels/vector8.cuh"

namespace ringtrain::kernels {

namespace {
#define RT_GRID_STRIDE(i, n)                                                                     \
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)

template <typename T>
__global__ void relu_forward_kernel(const T* __restrict__ x, T* __restrict__ y, std::size_t n) {
  RT_GRID_STRIDE(i, n) store(y, i, relu_forward_element(load(x, i)));
}
template <typename T, typename D>
__global__ void relu_backward_kernel(const T* __restrict__ y, const T* __restrict__ dy,
                                     D* __restrict__ dx, std::size_t n) {
  RT_GRID_STRIDE(i, n) store(dx, i, relu_backward_element(load(y, i), load(dy, i)));
}
template <typename T>
__global__ void gelu_tanh_forward_kernel(const T* __restrict__ x, T* __restrict__ y,
                                         std::size_t n) {
  RT_GRID_STRIDE(i, n) store(y, i, gelu_tanh_forward_element(load(x, i)));
}
template <typename T, typename D>
__global__ void gelu_tanh_backward_kernel(const T* __restrict__ x, const T* __restrict__ dy,
                                          D* __restrict__ dx, std::size_t n) {
  RT_GRID_STRIDE(i, n) store(dx, i, gelu_tanh_backward_element(load(x, i), load(dy, i)));
}
// y may be x0 (a paired gradient summed in place): those two are not restrict.
template <typename T>
__global__ void sum_two_kernel(const T* x0, const T* __restrict__ x1, float a, T* y,
                               std::size_t n) {
  RT_GRID_STRIDE(i, n) store(y, i, axpy_element(a, load(x1, i), load(x0, i)));
}
// The same sums 8 at a time (16-byte accesses), where n is a multiple of 8
// and the three buffers are 16-byte aligned: a residual network's branch
// points, every step. y may be x0 here too: each thread reads its 8 of x0
// before it writes them.
template <typename T>
__global__ void sum_two8_kernel(const T* x0, const T* __restrict__ x1, float a, T* y,
                                std::size_t vectors) {
  RT_GRID_STRIDE(v, vectors) {
    float u[kVector8], w[kVector8], out[kVector8];
    load8(x0, v * kVector8, u);
    load8(x1, v * kVector8, w);
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) out[k] = axpy_element(a, w[k], u[k]);
    store8(y, v * kVector8, out);
  }
}
template <typename T>
__global__ void add_widened_kernel(const T* __restrict__ x, float* __restrict__ y, std::size_t n) {
  RT_GRID_STRIDE(i, n) y[i] = axpy_element(1.0f, load(x, i), y[i]);
}
// The same adds 8 at a time (one 16-byte load of x, two of y), where n is a
// multiple of 8 and both buffers are 16-byte aligned: the fp32 sums of an
// Inception block's input gradient, a branch each.
template <typename T>
__global__ void add_widened8_kernel(const T* __restrict__ x, float* __restrict__ y,
                                    std::size_t vectors) {
  RT_GRID_STRIDE(v, vectors) {
    float u[kVector8], w[kVector8];
    load8(x, v * kVector8, u);
    load8(y, v * kVector8, w);
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) w[k] = axpy_element(1.0f, u[k], w[k]);
    store8(y, v * kVector8, w);
  }
}
// narrow_sum's pass: each element's terms added to its fp32 sum in order,
// the sum rounded once into the 16-bit output.
template <typename T, typename D>
__global__ void narrow_sum_kernel(D* __restrict__ y, const float* __restrict__ sum,
                                  NarrowSumTerms terms, std::size_t n) {
  RT_GRID_STRIDE(i, n) {
    float acc = sum[i];
    // Unrolled to the bound, so that each term's pointer is read from the
    // parameters directly (a run-time index would copy them to local memory).
#pragma unroll
    for (unsigned k = 0; k < NarrowSumTerms::kMax; ++k)
      if (k < terms.count)
        acc = axpy_element(1.0f, load(static_cast<const T*>(terms.term[k]), i), acc);
    store(y, i, acc);
  }
}
// The same 8 at a time (16-byte accesses; n a multiple of 8, every buffer
// 16-byte aligned), the term count fixed so that every load is issued
// before the adds.
template <typename T, typename D, unsigned Count>
__global__ void narrow_sum8_kernel(D* __restrict__ y, const float* __restrict__ sum,
                                   NarrowSumTerms terms, std::size_t vectors) {
  RT_GRID_STRIDE(v, vectors) {
    float acc[kVector8], u[Count][kVector8];
    load8(sum, v * kVector8, acc);
#pragma unroll
    for (unsigned k = 0; k < Count; ++k)
      load8(static_cast<const T*>(terms.term[k]), v * kVector8, u[k]);
#pragma unroll
    for (unsigned k = 0; k < Count; ++k)
#pragma unroll
      for (unsigned e = 0; e < kVector8; ++e) acc[e] = axpy_element(1.0f, u[k][e], acc[e]);
    store8(y, v * kVector8, acc);
  }
}
template <typename T, typename D>
__global__ void scale_kernel(const T* __restrict__ x, float a, D* __restrict__ y, std::size_t n) {
  RT_GRID_STRIDE(i, n) store(y, i, scale_element(load(x, i), a));
}
template <typename T, typename D>
__global__ void convert_blocks_kernel(D* __restrict__ dst, std::size_t dst_pitch,
                                      const T* __restrict__ src, std::size_t src_pitch,
                                      std::size_t width, std::size_t n) {
  RT_GRID_STRIDE(i, n) {
    const std::size_t r = i / width, c = i - r * width;
    store(dst, r * dst_pitch + c, load(src, r * src_pitch + c));
  }
}
#undef RT_GRID_STRIDE

cudaStream_t as_stream(void* stream) {
  return static_cast<cudaStream_t>(stream);
}
}  // namespace

void relu_forward_stored_cuda(const void* x, void* y, DType t, std::size_t n, void* stream) {
  if (n == 0) return;
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    relu_forward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), n);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void relu_backward_stored_cuda(const void* y, const void* dy, DType t, void* dx, DType dx_type,
                               std::size_t n, void* stream) {
  if (n == 0) return;
  with_storage_pair(t, dx_type, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    relu_backward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(y), static_cast<const T*>(dy), static_cast<D*>(dx), n);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void gelu_tanh_forward_stored_cuda(const void* x, void* y, DType t, std::size_t n, void* stream) {
  if (n == 0) return;
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    gelu_tanh_forward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), n);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void gelu_tanh_backward_stored_cuda(const void* x, const void* dy, DType t, void* dx, DType dx_type,
                                    std::size_t n, void* stream) {
  if (n == 0) return;
  with_storage_pair(t, dx_type, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    gelu_tanh_backward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<D*>(dx), n);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void sum_two_stored_cuda(const void* x0, const void* x1, float a, void* y, DType t, std::size_t n,
                         void* stream) {
  if (n == 0) return;
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    const auto* u = static_cast<const T*>(x0);
    const auto* w = static_cast<const T*>(x1);
    auto* out = static_cast<T*>(y);
    if (n % kVector8 == 0 && vector8_aligned(u) && vector8_aligned(w) && vector8_aligned(out))
      sum_two8_kernel<<<elementwise_blocks(n / kVector8), kElementwiseThreads, 0,
                        as_stream(stream)>>>(u, w, a, out, n / kVector8);
    else
      sum_two_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, as_stream(stream)>>>(u, w, a,
                                                                                           out, n);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void add_widened_cuda(const void* x, DType t, float* y, std::size_t n, void* stream) {
  if (n == 0) return;
  with_storage(t, [&](auto s) {
    using T = decltype(s);
    const auto* u = static_cast<const T*>(x);
    if (n % kVector8 == 0 && vector8_aligned(u) && vector8_aligned(y))
      add_widened8_kernel<<<elementwise_blocks(n / kVector8), kElementwiseThreads, 0,
                            as_stream(stream)>>>(u, y, n / kVector8);
    else
      add_widened_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, as_stream(stream)>>>(u, y,
                                                                                               n);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void narrow_sum_cuda(void* y, DType y_type, const float* sum, const NarrowSumTerms& terms, DType t,
                     std::size_t n, void* stream) {
  if (n == 0) return;
  bool vector = n % kVector8 == 0 && vector8_aligned(sum) && vector8_aligned(static_cast<char*>(y));
  for (unsigned k = 0; k < terms.count; ++k)
    vector = vector && vector8_aligned(static_cast<const char*>(terms.term[k]));
  with_storage_pair(t, y_type, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    auto* out = static_cast<D*>(y);
    const cudaStream_t st = as_stream(stream);
    if (!vector) {
      narrow_sum_kernel<T>
          <<<elementwise_blocks(n), kElementwiseThreads, 0, st>>>(out, sum, terms, n);
      return;
    }
    const std::size_t vectors = n / kVector8;
    const unsigned blocks = elementwise_blocks(vectors);
    switch (terms.count) {
      case 1:
        narrow_sum8_kernel<T, D, 1>
            <<<blocks, kElementwiseThreads, 0, st>>>(out, sum, terms, vectors);
        break;
      case 2:
        narrow_sum8_kernel<T, D, 2>
            <<<blocks, kElementwiseThreads, 0, st>>>(out, sum, terms, vectors);
        break;
      case 3:
        narrow_sum8_kernel<T, D, 3>
            <<<blocks, kElementwiseThreads, 0, st>>>(out, sum, terms, vectors);
        break;
      default:
        narrow_sum8_kernel<T, D, 4>
            <<<blocks, kElementwiseThreads, 0, st>>>(out, sum, terms, vectors);
        break;
    }
  });
  RT_CUDA_CHECK_LAUNCH();
}

void scale_stored_cuda(const void* x, DType t, float a, void* y, DType y_type, std::size_t n,
                       void* stream) {
  if (n == 0) return;
  with_storage_pair(t, y_type, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    scale_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(x), a, static_cast<D*>(y), n);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void convert_blocks_cuda(void* dst, DType dst_type, std::size_t dst_pitch, const void* src,
                         DType src_type, std::size_t src_pitch, std::size_t width, std::size_t rows,
                         void* stream) {
  const std::size_t n = width * rows;
  if (n == 0) return;
  with_storage_pair(src_type, dst_type, [&](auto s, auto d) {
    using T = decltype(s);
    using D = decltype(d);
    convert_blocks_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, as_stream(stream)>>>(
        static_cast<D*>(dst), dst_pitch, static_cast<const T*>(src), src_pitch, width, n);
  });
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
