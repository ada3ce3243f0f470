// Fused residual add + LayerNorm (launchers in kernels/residual_layer_norm.h),
// over kernels/residual_layer_norm.cuh's element arithmetic. One warp per row,
// its sums lane-strided then combined by a butterfly of shuffles, as the plain
// layer_norm kernels in kernels/transformer.cu, in the same order: the fused
// node gives the unfused plan's bits on a GPU too.
#include <math.h>

#include "core/cuda/check_cuda.h"
#include "kernels/layer_norm_rows.cuh"
#include "kernels/residual_layer_norm.cuh"
#include "kernels/residual_layer_norm.h"
#include "kernels/storage.cuh"

namespace ringtrain::kernels {

namespace {

template <typename T>
__global__ void residual_layer_norm_forward_kernel(
    const T* __restrict__ x0, const T* __restrict__ x1, float scale, const float* __restrict__ w,
    const float* __restrict__ b, std::size_t rows, unsigned c, float eps, T* __restrict__ sum,
    T* __restrict__ y, float* __restrict__ mean_out, float* __restrict__ rstd_out) {
  const std::size_t row = warp_row();
  const unsigned lane = warp_lane();
  if (row >= rows) return;
  const T* ar = x0 + row * c;
  const T* br = x1 + row * c;
  T* sr = sum + row * c;
  // Each lane reads back only the columns it stored.
  float s = 0.0f;
  for (unsigned j = lane; j < c; j += kWarp) {
    store(sr, j, residual_sum_element(load(ar, j), load(br, j), scale));
    s += load(sr, j);
  }
  warp_layer_norm_row(sr, s, c, lane, eps, w, b, y + row * c, &mean_out[row], &rstd_out[row]);
}

template <typename T, typename G, typename D0, typename D1>
__global__ void residual_layer_norm_backward_kernel(
    const T* __restrict__ sum, const float* __restrict__ w, const T* __restrict__ dy,
    std::size_t rows, unsigned c, const float* __restrict__ mean_in,
    const float* __restrict__ rstd_in, const G* __restrict__ d_sum, bool summed, float scale,
    D0* __restrict__ dx0, D1* __restrict__ dx1) {
  const std::size_t row = warp_row();
  const unsigned lane = warp_lane();
  if (row >= rows) return;
  const float mean = mean_in[row], rstd = rstd_in[row];
  const T* xr = sum + row * c;
  const T* dyr = dy + row * c;
  const LayerNormRowSums s = warp_layer_norm_backward_sums(xr, dyr, w, c, lane, mean, rstd);
  const std::size_t at = row * c;
  for (unsigned j = lane; j < c; j += kWarp) {
    const float dx = layer_norm_dx_element(load(xr, j), load(dyr, j), w[j], mean, rstd, s);
    const float g = residual_gradient_element<T>(dx, summed, summed ? load(d_sum, at + j) : 0.0f);
    if (dx0 != nullptr) store(dx0, at + j, scale_element(g, 1.0f));
    if (dx1 != nullptr) store(dx1, at + j, scale_element(g, scale));
  }
}

}  // namespace

void residual_layer_norm_forward_cuda(const void* x0, const void* x1, float scale, DType t,
                                      const float* w, const float* b, std::size_t rows,
                                      std::size_t c, float eps, void* sum, void* y, float* mean,
                                      float* rstd, void* stream) {
  if (rows == 0) return;
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    residual_layer_norm_forward_kernel<<<warp_row_blocks(rows), kRowThreads, 0,
                                         static_cast<cudaStream_t>(stream)>>>(
        static_cast<const T*>(x0), static_cast<const T*>(x1), scale, w, b, rows,
        static_cast<unsigned>(c), eps, static_cast<T*>(sum), static_cast<T*>(y), mean, rstd);
  });
  RT_CUDA_CHECK_LAUNCH();
}

void residual_layer_norm_backward_cuda(const void* sum, DType t, const float* w, const void* dy,
                                       std::size_t rows, std::size_t c, const float* mean,
                                       const float* rstd, const void* d_sum, DType d_sum_type,
                                       bool summed, float scale, void* dx0, DType dx0_type,
                                       void* dx1, DType dx1_type, void* stream) {
  // The weight and bias gradients are layer_norm_param_grad's: without dx0
  // and dx1 there is nothing left to write.
  if (rows == 0 || (dx0 == nullptr && dx1 == nullptr)) return;
  with_storage(t, [&](auto storage) {
    using T = decltype(storage);
    with_storage_or_f32<T>(d_sum_type, [&](auto g_storage) {
      using G = decltype(g_storage);
      with_storage_or_f32<T>(dx0_type, [&](auto d0_storage) {
        using D0 = decltype(d0_storage);
        with_storage_or_f32<T>(dx1_type, [&](auto d1_storage) {
          using D1 = decltype(d1_storage);
          residual_layer_norm_backward_kernel<<<warp_row_blocks(rows), kRowThreads, 0,
                                                static_cast<cudaStream_t>(stream)>>>(
              static_cast<const T*>(sum), w, static_cast<const T*>(dy), rows,
              static_cast<unsigned>(c), mean, rstd, static_cast<const G*>(d_sum), summed, scale,
              static_cast<D0*>(dx0), static_cast<D1*>(dx1));
        });
      });
    });
  });
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
