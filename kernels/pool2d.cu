// Max and average pooling on a GPU with the arithmetic of kernels/pool2d.cuh.
//
// One thread per output (forward) or per input-gradient element (backward),
// over a grid whose y dimension walks the batch, so a thread finds its
// (channel, row, column) within one sample in 32 bits without a division
// (kernels/fast_divide.cuh). In channels-last the channel is the fastest
// index, so a warp reads 32 neighbouring channels of one pixel: coalesced.
//
// Channels-last with 8 | C and 16-byte-aligned buffers (the models' common
// case) takes the *_rows8 kernels: 8 channels of one pixel a thread, each
// access 16 bytes (kernels/vector8.cuh) where the element kernels made 2-byte
// ones, and for the common kernel sizes the window unrolled, all its loads
// issued before the first comparison or sum. Each channel still goes through
// pool2d.cuh's steps with the same values in the same order: the same bits.
//
// Why not cuDNN: its pooling backward (the legacy API's only one) took 19.9 ms
// of vgg16's 87.5 ms TF32 step on an H200 against 1.8 ms for the forward
// (docs/gpu.md, round 5), and its average-pool forward was slower than its
// backward in inception3. Max here records the argmax in the forward, so the
// backward reads dy and the indices once and writes dx once, no atomics:
// bit-for-bit repeatable, and ties go to the first maximum as on the CPU.
#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "core/cuda/check_cuda.h"
#include "kernels/fast_divide.cuh"
#include "kernels/launch_shape.cuh"
#include "kernels/pool2d.cuh"
#include "kernels/pool2d.h"
#include "kernels/vector8.cuh"
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

// ---- 8 channels of one pixel a thread (NHWC, 8 | C, aligned buffers) ----

// 8 consecutive argmax indices in two 16-byte accesses (first a multiple of 8).
__device__ __forceinline__ void load8_index(const std::int32_t* p, std::size_t first,
                                            std::int32_t (&out)[kVector8]) {
  const auto* from = reinterpret_cast<const int4*>(p + first);
  const int4 a = from[0], b = from[1];
  const std::int32_t v[kVector8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
  for (unsigned k = 0; k < kVector8; ++k) out[k] = v[k];
}
__device__ __forceinline__ void store8_index(std::int32_t* p, std::size_t first,
                                             const std::uint32_t (&in)[kVector8]) {
  auto* to = reinterpret_cast<int4*>(p + first);
  const auto i = [&](unsigned k) { return static_cast<std::int32_t>(in[k]); };
  to[0] = make_int4(i(0), i(1), i(2), i(3));
  to[1] = make_int4(i(4), i(5), i(6), i(7));
}

// The outputs (forward) of 8 channels at channel-group offset `first` of a
// sample's plane base x (pixel i at x + i * C), over the window rows x cols.
// K: the kernel size when known at compile time (the window unrolled, its
// loads first), 0 for any.
template <bool Max, unsigned K, typename T>
__device__ __forceinline__ void pool_window8(const T* __restrict__ x, std::size_t first,
                                             std::uint32_t C, PoolShape s, PoolSpan rows,
                                             PoolSpan cols, float (&out)[kVector8],
                                             std::uint32_t (&at)[kVector8]) {
  const auto pixel_at = [&](std::uint32_t r, std::uint32_t c) {
    return first + static_cast<std::size_t>(r * s.width + c) * C;
  };
  const std::uint32_t origin = rows.begin * s.width + cols.begin;
  if constexpr (K != 0) {
    float v[K][K][kVector8];
#pragma unroll
    for (unsigned i = 0; i < K; ++i)
#pragma unroll
      for (unsigned j = 0; j < K; ++j)
        if (rows.begin + i < rows.end && cols.begin + j < cols.end)
          load8(x, pixel_at(rows.begin + i, cols.begin + j), v[i][j]);
    // A window is never empty: v[0][0] (its first value) was loaded.
    MaxPick pick[kVector8];
    float sum[kVector8];
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) {
      pick[k] = MaxPick{v[0][0][k], origin};
      sum[k] = 0.0f;
    }
#pragma unroll
    for (unsigned i = 0; i < K; ++i)
#pragma unroll
      for (unsigned j = 0; j < K; ++j)
        if (rows.begin + i < rows.end && cols.begin + j < cols.end)
#pragma unroll
          for (unsigned k = 0; k < kVector8; ++k) {
            if constexpr (Max)
              pick[k].offer(v[i][j][k], (rows.begin + i) * s.width + cols.begin + j);
            else
              sum[k] += v[i][j][k];
          }
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) {
      out[k] = Max ? pick[k].best : avg_pool_mean(sum[k], s);
      at[k] = pick[k].at;
    }
  } else {
    float v[kVector8];
    load8(x, pixel_at(rows.begin, cols.begin), v);
    MaxPick pick[kVector8];
    float sum[kVector8];
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) {
      pick[k] = MaxPick{v[k], origin};
      sum[k] = 0.0f;
    }
    for (std::uint32_t r = rows.begin; r < rows.end; ++r)
      for (std::uint32_t c = cols.begin; c < cols.end; ++c) {
        load8(x, pixel_at(r, c), v);
#pragma unroll
        for (unsigned k = 0; k < kVector8; ++k) {
          if constexpr (Max)
            pick[k].offer(v[k], r * s.width + c);
          else
            sum[k] += v[k];
        }
      }
#pragma unroll
    for (unsigned k = 0; k < kVector8; ++k) {
      out[k] = Max ? pick[k].best : avg_pool_mean(sum[k], s);
      at[k] = pick[k].at;
    }
  }
}

// One thread per 8 channels of an output pixel. groups: C / 8 as the
// channels of a SampleIndex over the output (per_sample of them a sample).
template <bool Max, unsigned K, typename T>
__global__ void pool2d_forward_rows8_kernel(const T* __restrict__ x, T* __restrict__ y,
                                            std::int32_t* __restrict__ argmax, std::uint32_t batch,
                                            std::uint32_t per_sample, SampleIndex groups,
                                            PoolShape s) {
  const std::uint32_t C = groups.channels.divisor * kVector8;
  const std::size_t in_sample = static_cast<std::size_t>(C) * s.height * s.width;
  for (std::uint32_t n = blockIdx.y; n < batch; n += gridDim.y) {
    for (std::uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < per_sample;
         e += gridDim.x * blockDim.x) {
      std::uint32_t g, oh, ow;
      groups.split(e, &g, &oh, &ow);
      // The output's 8 channels sit at e * 8 of its sample (pixel * C + g * 8).
      const std::size_t o = (static_cast<std::size_t>(n) * per_sample + e) * kVector8;
      float out[kVector8];
      std::uint32_t at[kVector8];
      pool_window8<Max, K>(x, n * in_sample + std::size_t{g} * kVector8, C, s,
                           pool_window_span(oh, s.height, s), pool_window_span(ow, s.width, s), out,
                           at);
      store8(y, o, out);
      if constexpr (Max) store8_index(argmax, o, at);
    }
  }
}

// One covering output's term of 8 channels' input gradients (pool2d.cuh's
// steps): its dy where the input is its argmax (Max), else dy / k^2. a is
// not read for an average.
template <bool Max>
__device__ __forceinline__ void add_grad_terms8(float (&acc)[kVector8], const float (&d)[kVector8],
                                                const std::int32_t (&a)[kVector8],
                                                std::int32_t self, float inv_area) {
#pragma unroll
  for (unsigned k = 0; k < kVector8; ++k) {
    if constexpr (Max)
      max_pool_grad_add(acc[k], a[k], self, d[k]);
    else
      avg_pool_grad_add(acc[k], d[k], inv_area);
  }
}

// One thread per 8 channels of an input pixel: the gather of pool2d.cuh's
// *_input_grad over its covering outputs. K, S: the window's size and stride
// when known at compile time (at most ceil(K / S) covering outputs a side,
// pool_max_cover; their loads all issued before the first term), 0 for any.
template <bool Max, unsigned K, unsigned S, typename T, typename D>
__global__ void pool2d_backward_rows8_kernel(const T* __restrict__ dy,
                                             const std::int32_t* __restrict__ argmax,
                                             D* __restrict__ dx, std::uint32_t batch,
                                             std::uint32_t per_sample, SampleIndex groups,
                                             PoolShape s) {
  const std::uint32_t C = groups.channels.divisor * kVector8;
  const std::size_t out_sample = static_cast<std::size_t>(C) * s.out_height * s.out_width;
  const float inv_area = pool_inv_area(s);
  for (std::uint32_t n = blockIdx.y; n < batch; n += gridDim.y) {
    for (std::uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < per_sample;
         e += gridDim.x * blockDim.x) {
      std::uint32_t g, h, w;
      groups.split(e, &g, &h, &w);
      const std::size_t first = n * out_sample + std::size_t{g} * kVector8;
      const auto output_at = [&](std::uint32_t oh, std::uint32_t ow) {
        return first + static_cast<std::size_t>(oh * s.out_width + ow) * C;
      };
      const PoolSpan rows = pool_covering_span(h, s.out_height, s),
                     cols = pool_covering_span(w, s.out_width, s);
      const auto self = static_cast<std::int32_t>(h * s.width + w);
      float acc[kVector8];
#pragma unroll
      for (unsigned k = 0; k < kVector8; ++k) acc[k] = 0.0f;
      if constexpr (K != 0) {
        constexpr unsigned kCover = pool_max_cover(K, S);
        float d[kCover][kCover][kVector8];
        std::int32_t a[kCover][kCover][kVector8];  // unused (and dropped) for an average
#pragma unroll
        for (unsigned i = 0; i < kCover; ++i)
#pragma unroll
          for (unsigned j = 0; j < kCover; ++j)
            if (rows.begin + i < rows.end && cols.begin + j < cols.end) {
              load8(dy, output_at(rows.begin + i, cols.begin + j), d[i][j]);
              if constexpr (Max)
                load8_index(argmax, output_at(rows.begin + i, cols.begin + j), a[i][j]);
            }
#pragma unroll
        for (unsigned i = 0; i < kCover; ++i)
#pragma unroll
          for (unsigned j = 0; j < kCover; ++j)
            if (rows.begin + i < rows.end && cols.begin + j < cols.end)
              add_grad_terms8<Max>(acc, d[i][j], a[i][j], self, inv_area);
      } else {
        for (std::uint32_t oh = rows.begin; oh < rows.end; ++oh)
          for (std::uint32_t ow = cols.begin; ow < cols.end; ++ow) {
            float d[kVector8];
            std::int32_t a[kVector8];
            load8(dy, output_at(oh, ow), d);
            if constexpr (Max) load8_index(argmax, output_at(oh, ow), a);
            add_grad_terms8<Max>(acc, d, a, self, inv_area);
          }
      }
      store8(dx, (static_cast<std::size_t>(n) * per_sample + e) * kVector8, acc);
    }
  }
}

// Windows that do not overlap (kernel == stride == K): the input splits into
// K x K tiles from row and column -padding, tile (i, j) being output (i, j)'s
// window where that output exists. One thread per 8 channels of a tile reads
// its output's dy and argmax once and writes every input of the tile, each
// the gather's value (0.0f plus the one covering term, or 0.0f uncovered):
// every dx element written once, by one thread. groups: C / 8 as the
// channels of a SampleIndex over the tiles.
template <bool Max, unsigned K, typename T, typename D>
__global__ void pool2d_backward_tiles8_kernel(const T* __restrict__ dy,
                                              const std::int32_t* __restrict__ argmax,
                                              D* __restrict__ dx, std::uint32_t batch,
                                              std::uint32_t per_sample, SampleIndex groups,
                                              PoolShape s) {
  const std::uint32_t C = groups.channels.divisor * kVector8;
  const std::size_t out_sample = static_cast<std::size_t>(C) * s.out_height * s.out_width;
  const std::size_t in_sample = static_cast<std::size_t>(C) * s.height * s.width;
  const float inv_area = pool_inv_area(s);
  for (std::uint32_t n = blockIdx.y; n < batch; n += gridDim.y) {
    for (std::uint32_t e = blockIdx.x * blockDim.x + threadIdx.x; e < per_sample;
         e += gridDim.x * blockDim.x) {
      std::uint32_t g, th, tw;
      groups.split(e, &g, &th, &tw);
      const bool window = th < s.out_height && tw < s.out_width;
      float d[kVector8];
      std::int32_t a[kVector8];
      if (window) {
        const std::size_t o = n * out_sample + std::size_t{g} * kVector8 +
                              static_cast<std::size_t>(th * s.out_width + tw) * C;
        load8(dy, o, d);
        if constexpr (Max) load8_index(argmax, o, a);
      }
      const std::int64_t top = std::int64_t{th} * K - s.padding,
                         left = std::int64_t{tw} * K - s.padding;
#pragma unroll
      for (unsigned i = 0; i < K; ++i)
#pragma unroll
        for (unsigned j = 0; j < K; ++j) {
          const std::int64_t r = top + i, c = left + j;
          if (r < 0 || r >= s.height || c < 0 || c >= s.width) continue;
          const auto self = static_cast<std::int32_t>(r * s.width + c);
          float acc[kVector8];
#pragma unroll
          for (unsigned k = 0; k < kVector8; ++k) acc[k] = 0.0f;
          if (window) add_grad_terms8<Max>(acc, d, a, self, inv_area);
          store8(dx, n * in_sample + std::size_t{g} * kVector8 + static_cast<std::size_t>(self) * C,
                 acc);
        }
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

// The vector kernels' instances: the common window shapes unrolled, any other
// shape through the run-time loops (K = 0).
template <bool Max, typename T>
auto forward_rows8_for(const PoolShape& s) {
  switch (s.kernel) {
    case 2:
      return pool2d_forward_rows8_kernel<Max, 2, T>;
    case 3:
      return pool2d_forward_rows8_kernel<Max, 3, T>;
    default:
      return pool2d_forward_rows8_kernel<Max, 0, T>;
  }
}

template <bool Max, typename T, typename D>
auto backward_rows8_for(const PoolShape& s) {
  if (s.kernel == 3 && s.stride == 2) return pool2d_backward_rows8_kernel<Max, 3, 2, T, D>;
  if (s.kernel == 3 && s.stride == 1) return pool2d_backward_rows8_kernel<Max, 3, 1, T, D>;
  return pool2d_backward_rows8_kernel<Max, 0, 0, T, D>;
}

// 8 channels a thread: channels-last, 8 | C, every buffer 16-byte aligned
// (each sample's and pixel's group of 8 then is too).
bool rows8(bool nhwc, std::size_t channels, std::initializer_list<const void*> buffers) {
  if (!nhwc || channels % kVector8 != 0) return false;
  for (const void* p : buffers)
    if (p != nullptr && !vector8_aligned(p)) return false;
  return true;
}

}  // namespace

void pool2d_forward_cuda(const void* x, void* y, DType t, std::int32_t* argmax, std::size_t batch,
                         std::size_t channels, const PoolShape& shape, bool max, bool nhwc,
                         void* stream) {
  if (batch == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  const std::size_t out_pixels = std::size_t{shape.out_height} * shape.out_width;
  if (rows8(nhwc, channels, {x, y, max ? argmax : nullptr})) {
    const std::uint32_t per_sample = checked_per_sample(channels / kVector8, out_pixels);
    const SampleIndex groups{FastDivide(static_cast<std::uint32_t>(channels / kVector8)),
                             FastDivide(shape.out_height), FastDivide(shape.out_width), true};
    with_storage(t, [&](auto storage) {
      using T = decltype(storage);
      const auto kernel =
          max ? forward_rows8_for<true, T>(shape) : forward_rows8_for<false, T>(shape);
      kernel<<<sample_grid(batch, per_sample), kElementwiseThreads, 0, cuda_stream>>>(
          static_cast<const T*>(x), static_cast<T*>(y), max ? argmax : nullptr,
          static_cast<std::uint32_t>(batch), per_sample, groups, shape);
    });
    RT_CUDA_CHECK_LAUNCH();
    return;
  }
  const std::uint32_t per_sample = checked_per_sample(channels, out_pixels);
  const SampleIndex out{FastDivide(static_cast<std::uint32_t>(channels)),
                        FastDivide(shape.out_height), FastDivide(shape.out_width), nhwc};
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    const auto kernel = max ? pool2d_forward_kernel<true, T> : pool2d_forward_kernel<false, T>;
    kernel<<<sample_grid(batch, per_sample), kElementwiseThreads, 0, cuda_stream>>>(
        static_cast<const T*>(x), static_cast<T*>(y), max ? argmax : nullptr,
        static_cast<std::uint32_t>(batch), per_sample, out, shape);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void pool2d_backward_cuda(const void* dy, DType t, const std::int32_t* argmax, void* dx,
                          DType dx_type, std::size_t batch, std::size_t channels,
                          const PoolShape& shape, bool max, bool nhwc, void* stream) {
  if (batch == 0) return;
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  if ((dx_type == t || dx_type == DType::f32) &&
      rows8(nhwc, channels, {dy, dx, max ? argmax : nullptr})) {
    const auto groups = static_cast<std::uint32_t>(channels / kVector8);
    with_storage(t, [&](auto storage) {
      using T = decltype(storage);
      with_storage_or_f32<T>(dx_type, [&](auto dx_storage) {
        using D = decltype(dx_storage);
        if (shape.kernel == 2 && shape.stride == 2) {
          // K x K tiles from -padding cover the input (the last ones past the
          // last window, or partly outside the input).
          const std::uint32_t tile_rows = (shape.height + shape.padding + 1) / 2,
                              tile_cols = (shape.width + shape.padding + 1) / 2;
          const std::uint32_t per_sample =
              checked_per_sample(groups, std::size_t{tile_rows} * tile_cols);
          const SampleIndex tiles{FastDivide(groups), FastDivide(tile_rows), FastDivide(tile_cols),
                                  true};
          const auto kernel = max ? pool2d_backward_tiles8_kernel<true, 2, T, D>
                                  : pool2d_backward_tiles8_kernel<false, 2, T, D>;
          kernel<<<sample_grid(batch, per_sample), kElementwiseThreads, 0, cuda_stream>>>(
              static_cast<const T*>(dy), max ? argmax : nullptr, static_cast<D*>(dx),
              static_cast<std::uint32_t>(batch), per_sample, tiles, shape);
          return;
        }
        const std::uint32_t per_sample =
            checked_per_sample(groups, std::size_t{shape.height} * shape.width);
        const SampleIndex in{FastDivide(groups), FastDivide(shape.height), FastDivide(shape.width),
                             true};
        const auto kernel =
            max ? backward_rows8_for<true, T, D>(shape) : backward_rows8_for<false, T, D>(shape);
        kernel<<<sample_grid(batch, per_sample), kElementwiseThreads, 0, cuda_stream>>>(
            static_cast<const T*>(dy), max ? argmax : nullptr, static_cast<D*>(dx),
            static_cast<std::uint32_t>(batch), per_sample, in, shape);
      });
    });
    RT_CUDA_CHECK_LAUNCH();
    return;
  }
  const std::uint32_t per_sample =
      checked_per_sample(channels, std::size_t{shape.height} * shape.width);
  const SampleIndex in{FastDivide(static_cast<std::uint32_t>(channels)), FastDivide(shape.height),
                       FastDivide(shape.width), nhwc};
  with_storage_pair(t, dx_type, [&](auto storage, auto dx_storage) {
    using T = decltype(storage);
    using D = decltype(dx_storage);
    const auto kernel =
        max ? pool2d_backward_kernel<true, T, D> : pool2d_backward_kernel<false, T, D>;
    kernel<<<sample_grid(batch, per_sample), kElementwiseThreads, 0, cuda_stream>>>(
        static_cast<const T*>(dy), max ? argmax : nullptr, static_cast<D*>(dx),
        static_cast<std::uint32_t>(batch), per_sample, in, shape);
  });
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
