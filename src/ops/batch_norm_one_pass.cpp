// The CPU twin of the GPU's one-pass statistics: kernels/batch_norm.cu's
// welford_rows_kernel, welford_planes_kernel and welford_slices_kernel, with
// the block's threads taken one after another (each thread's elements in the
// order that thread reads them), then the same merges in the same order.
// Compiled with -ffp-contract=off (CMakeLists.txt): no product is fused into
// an add on any CPU, as none is on the GPU (kernels/batch_norm_welford.cuh).
#include "ops/batch_norm_one_pass.h"

#include <vector>

#include "kernels/batch_norm_welford.cuh"
#include "kernels/storage.cuh"

namespace ringtrain::detail {

namespace {

using kernels::Welford;

template <typename T>
Welford block_rows(const T* x, std::size_t channels, std::size_t c, std::size_t begin,
                   std::size_t end, float shift) {
  Welford part[kernels::kBiasTileRows];
  for (std::size_t y = 0; y < kernels::kBiasTileRows; ++y) {
    Welford w{0.0f, 0.0f, 0.0f};
    for (std::size_t r = begin + y; r < end; r += kernels::kBiasTileRows)
      kernels::welford_update(w, kernels::load(x, r * channels + c), shift);
    part[y] = w;
  }
  Welford w = part[0];
  for (std::size_t j = 1; j < kernels::kBiasTileRows; ++j) w = kernels::welford_merge(w, part[j]);
  return w;
}

template <typename T>
Welford block_planes(const T* x, std::size_t channels, std::size_t inner, std::size_t c,
                     std::size_t begin, std::size_t end, float shift) {
  constexpr std::size_t kThreads = kernels::kBiasPlaneThreads;
  std::vector<Welford> part(kThreads);
  const std::size_t elements = (end - begin) * inner;
  for (std::size_t t = 0; t < kThreads; ++t) {
    Welford w{0.0f, 0.0f, 0.0f};
    for (std::size_t e = t; e < elements; e += kThreads) {
      const std::size_t o = begin + e / inner, i = e % inner;
      kernels::welford_update(w, kernels::load(x, (o * channels + c) * inner + i), shift);
    }
    part[t] = w;
  }
  for (std::size_t s = kThreads / 2; s > 0; s >>= 1)
    for (std::size_t t = 0; t < s; ++t) part[t] = kernels::welford_merge(part[t], part[t + s]);
  return part[0];
}

template <typename T>
void twin(const T* x, std::size_t n, std::size_t channels, std::size_t hw,
          std::size_t scratch_floats, float* mean, float* m2, float* count) {
  std::size_t outer = n, inner = hw;
  if (inner == 0) {
    inner = 1;
    outer = 0;
  }
  const kernels::BiasGradSplit split =
      kernels::welford_split(outer, channels, inner, scratch_floats);
  for (std::size_t c = 0; c < channels; ++c) {
    const float shift = outer > 0 ? kernels::load(x, c * inner) : 0.0f;
    Welford w{0.0f, 0.0f, 0.0f};
    for (std::size_t slice = 0; slice < split.slices; ++slice) {
      const std::size_t begin = kernels::bias_slice_begin(slice, split.rows_per_slice);
      const std::size_t end = kernels::bias_slice_end(slice, split.rows_per_slice, outer);
      const Welford b = inner == 1 ? block_rows(x, channels, c, begin, end, shift)
                                   : block_planes(x, channels, inner, c, begin, end, shift);
      // One slice: the block finishes it itself; merge(empty, b) is b exactly.
      w = kernels::welford_merge(w, b);
    }
    mean[c] = kernels::welford_mean(w, shift);
    m2[c] = w.m2;
  }
  *count = static_cast<float>(n * hw);
}

}  // namespace

void one_pass_statistics_twin(const void* x, DType t, std::size_t n, std::size_t c, std::size_t hw,
                              std::size_t scratch_floats, float* mean, float* m2, float* count) {
  kernels::with_storage(t, [&](auto s) {
    using T = decltype(s);
    twin(static_cast<const T*>(x), n, c, hw, scratch_floats, mean, m2, count);
  });
}

}  // namespace ringtrain::detail
