#include "ringtrain/ops/layout_transpose.h"

#include "kernels/layout.cuh"
#include "kernels/storage.cuh"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"
#include "ringtrain/ops/precision.h"

namespace ringtrain {

void transpose_batched(const ComputeContext& ctx, BufferView x, BufferView y, std::size_t batch,
                       std::size_t rows, std::size_t cols) {
  if (batch == 0 || rows == 0 || cols == 0) return;
  RT_CHECK(is_compute_precision(x.dtype) && is_compute_precision(y.dtype),
           "transpose: {} to {}, not between storage dtypes", dtype_name(x.dtype),
           dtype_name(y.dtype));
  RT_CHECK(x.count >= batch * rows * cols && y.count >= batch * rows * cols,
           "transpose: {} and {} elements for {} x {} x {}", x.count, y.count, batch, rows, cols);
  if (ctx.is_cuda()) return detail::gpu_transpose_batched(ctx.stream(), x, y, batch, rows, cols);
  kernels::with_storage_pair(x.dtype, y.dtype, [&](auto t, auto d) {
    using T = decltype(t);
    using D = decltype(d);
    const T* from = static_cast<const T*>(x.ptr);
    D* to = static_cast<D*>(y.ptr);
    // Blocks of rows keep the writes of one block within a few cache lines.
    constexpr std::size_t kBlock = 16;
    for (std::size_t n = 0; n < batch; ++n)
      for (std::size_t i0 = 0; i0 < rows; i0 += kBlock)
        for (std::size_t j = 0; j < cols; ++j)
          for (std::size_t i = i0; i < rows && i < i0 + kBlock; ++i)
            kernels::store(to, kernels::transposed_index(n, i, j, rows, cols),
                           kernels::load(from, (n * rows + i) * cols + j));
  });
}

}  // namespace ringtrain
