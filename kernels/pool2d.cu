// Max and average pooling on a GPU with the arithmetic of kernels/pool2d.cuh.
//
// One thread per output (forward) or per input-gradient element (backward),
// over a grid whose y dimension walks the batch, so a thread finds its
// (channel, row, column) within one sample in 32 bits without a division
// (kernels/fast_divide.cuh). In channels-last the channel is the fastest
// index, so a warp reads 32 neighbouring channels of one pixel: coalesced.
//
// Why not cuDNN: its pooling backward (the legacy API's only one) took 19.9 ms
// of vgg16's 87.5 ms TF32 step on an H200 against 1.8 ms for the forward
// (docs/gpu.md, round 5), and its average-pool forward was slower than its
// backward in inception3. Max here records the argmax in the forward, so the
// backward reads dy and the indices once and writes dx once, no atomics:
// bit-for-bit repeatable, and ties go to the first maximum as on the CPU.
#include <algorithm>
#include <cstdint>

#include "core/cuda/check_cuda.h"
#include "kernels/fast_divide.cuh"
#include "kernels/launch_shape.cuh"
#include "kernels/pool2d.cuh"
#include "kernels/pool2d.h"
#include "ringtrain/core/check.h"

namespace ringtrain::kernels {

namespace {

// (channel, row, column) of element e of one sample of a [C, rows, cols]
// (NCHW) or [rows, cols, C] (NHWC) tensor, and the offsets of its plane.
struct SampleIndex {
  FastDivide channels, rows, cols;
  bool nhwc;
  RT_HD void split(std::uint32_t e, std::uint32_t* c, std::uint32_t* r, std::uint32_t* q) const {
    if (nhwc) {
      const std::uint32_t pixel = channels.divide(e);
      *c = e - pixel * channels.divisor;
      *r = cols.divide(pixel);
      *q = pixel - *r * cols.divisor;
    } else {
      const std::uint32_t t = cols.divide(e);
      *q = e - t * cols.divisor;
      *c = rows.divide(t);
      *r = t - *c * rows.divisor;
    }
  }
  // Offset of channel c's plane within a sample, and the pixel stride.
  RT_HD std::size_t plane(std::uint32_t c, std::uint32_t plane_pixels) const {
    return nhwc ? c : static_cast<std::size_t>(c) * plane_pixels;
  }
  RT_HD std::uint32_t pixel() const { return nhwc ? channels.divisor : 1u; }
};

// x and y of a storage type T, dy of T and dx of D (T, or fp32 where the model
// sums): loaded to fp32, each output stored once.
template <bool Max, typename T>
__global__ void pool2d_forward_kernel(const T* __restrict__ x, T* __restrict__ y,
                                      std::int32_t* __restrict__ argmax, std::uint32_t batch,
                                      std::uint32_t per_sample, SampleIndex out, PoolShape s) {
  const std::uint32_t in_pixels = s.height * s.width;
  const std::size_t in_sample = static_cast<std::size_t>(out.channels.divisor) * in_pixels;
  for (std::uint32_t n = blockIdx.y; n < batch; n += gridDim.y) {
    for (std::uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < per_sample;
         e += gridDim.x * blockDim.x) {
      std::uint32_t c, oh, ow;
      out.split(e, &c, &oh, &ow);
      const StoredPlane<T> plane{x + n * in_sample + out.plane(c, in_pixels), out.pixel()};
      const std::size_t o = static_cast<std::size_t>(n) * per_sample + e;
      const PoolSpan rows = pool_window_span(oh, s.height, s),
                     cols = pool_window_span(ow, s.width, s);
      if constexpr (Max) {
        std::int32_t at;
        store(y, o, max_pool_output(plane, s, rows, cols, &at));
        argmax[o] = at;
      } else {
        store(y, o, avg_pool_output(plane, s, rows, cols));
      }
    }
  }
}

template <bool Max, typename T, typename D>
__global__ void pool2d_backward_kernel(const T* __restrict__ dy,
                                       const std::int32_t* __restrict__ argmax, D* __restrict__ dx,
                                       std::uint32_t batch, std::uint32_t per_sample,
                                       SampleIndex in, PoolShape s) {
  const std::uint32_t out_pixels = s.out_height * s.out_width;
  const std::size_t out_sample = static_cast<std::size_t>(in.channels.divisor) * out_pixels;
  for (std::uint32_t n = blockIdx.y; n < batch; n += gridDim.y) {
    for (std::uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < per_sample;
         e += gridDim.x * blockDim.x) {
      std::uint32_t c, h, w;
      in.split(e, &c, &h, &w);
      const std::size_t at = static_cast<std::size_t>(n) * out_sample + in.plane(c, out_pixels);
      const StoredPlane<T> g{dy + at, in.pixel()};
      const std::size_t i = static_cast<std::size_t>(n) * per_sample + e;
      const PoolSpan rows = pool_covering_span(h, s.out_height, s),
                     cols = pool_covering_span(w, s.out_width, s);
      if constexpr (Max)
        store(dx, i,
              max_pool_input_grad(g, StridedPlane<const std::int32_t>{argmax + at, in.pixel()}, s,
                                  h, w, rows, cols));
      else
        store(dx, i, avg_pool_input_grad(g, s, rows, cols));
    }
  }
}

dim3 sample_grid(std::size_t batch, std::uint32_t per_sample) {
  const unsigned x = static_cast<unsigned>(std::max<std::size_t>(
      1,
      std::min<std::size_t>((per_sample + kElementwiseThreads - 1) / kElementwiseThreads, 65535)));
  return dim3(x, static_cast<unsigned>(std::min<std::size_t>(batch, 65535)));
}

std::uint32_t checked_per_sample(std::size_t channels, std::size_t pixels) {
  const std::size_t n = channels * pixels;
  // The grid-stride index reaches n + one grid's threads within 32 bits.
  RT_CHECK(n + std::size_t{65535} * kElementwiseThreads <= UINT32_MAX,
           "pool2d: a sample of {} elements is too large for the GPU kernel", n);
  return static_cast<std::uint32_t>(n);
}

}  // namespace

void pool2d_forward_cuda(const void* x, void* y, DType t, std::int32_t* argmax, std::size_t batch,
                         std::size_t channels, const PoolShape& shape, bool max, bool nhwc,
                         void* stream) {
  if (batch == 0) return;
  const std::uint32_t per_sample =
      checked_per_sample(channels, std::size_t{shape.out_height} * shape.out_width);
  const SampleIndex out{FastDivide(static_cast<std::uint32_t>(channels)),
                        FastDivide(shape.out_height), FastDivide(shape.out_width), nhwc};
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    const auto kernel = max ? pool2d_forward_kernel<true, T> : pool2d_forward_kernel<false, T>;
    kernel<<<sample_grid(batch, per_sample), kElementwiseThreads, 0,
             static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x), static_cast<T*>(y), max ? argmax : nullptr,
        static_cast<std::uint32_t>(batch), per_sample, out, shape);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void pool2d_backward_cuda(const void* dy, DType t, const std::int32_t* argmax, void* dx,
                          DType dx_type, std::size_t batch, std::size_t channels,
                          const PoolShape& shape, bool max, bool nhwc, void* stream) {
  if (batch == 0) return;
  const std::uint32_t per_sample =
      checked_per_sample(channels, std::size_t{shape.height} * shape.width);
  const SampleIndex in{FastDivide(static_cast<std::uint32_t>(channels)), FastDivide(shape.height),
                       FastDivide(shape.width), nhwc};
  with_storage_pair(t, dx_type, [&](auto storage, auto dx_storage) {
    using T = decltype(storage);
    using D = decltype(dx_storage);
    const auto kernel =
        max ? pool2d_backward_kernel<true, T, D> : pool2d_backward_kernel<false, T, D>;
    kernel<<<sample_grid(batch, per_sample), kElementwiseThreads, 0,
             static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(dy), max ? argmax : nullptr, static_cast<D*>(dx),
        static_cast<std::uint32_t>(batch), per_sample, in, shape);
  });
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
