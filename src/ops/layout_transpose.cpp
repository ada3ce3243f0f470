#include "ringtrain/ops/layout_transpose.h"

#include "kernels/layout.cuh"
#include "ops/gpu_ops.h"

namespace ringtrain {

void transpose_batched(const ComputeContext& ctx, const float* x, float* y, std::size_t batch,
                       std::size_t rows, std::size_t cols) {
  if (batch == 0 || rows == 0 || cols == 0) return;
  if (ctx.is_cuda()) return detail::gpu_transpose_batched(ctx.stream(), x, y, batch, rows, cols);
  // Blocks of rows keep the writes of one block within a few cache lines.
  constexpr std::size_t kBlock = 16;
  for (std::size_t n = 0; n < batch; ++n)
    for (std::size_t i0 = 0; i0 < rows; i0 += kBlock)
      for (std::size_t j = 0; j < cols; ++j)
        for (std::size_t i = i0; i < rows && i < i0 + kBlock; ++i)
          y[kernels::transposed_index(n, i, j, rows, cols)] = x[(n * rows + i) * cols + j];
}

}  // namespace ringtrain
