#include "ops/cuda/gpu_gemm_wgrad.h"

#include <cuda_runtime.h>

#include <algorithm>

#include <fmt/format.h>

#include "core/cuda/check_cuda.h"
#include "kernels/shifted_rows.h"
#include "kernels/unfolded_taps.h"
#include "ops/gpu_ops.h"
#include "ops/shifted_gemm_wgrad.h"
#include "ops/unfolded_gemm_wgrad.h"
#include "ringtrain/core/check.h"

namespace ringtrain::detail {

namespace {

class ShiftedGemmWgrad final : public ConvWgradGraph {
 public:
  ShiftedGemmWgrad(const ConvGraphShape& shape, const ShiftedWgradPlan& plan, std::size_t cap,
                   int rank)
      : s_(shape), plan_(plan), cap_(cap), rank_(rank) {}

  // A 1x1 filter's [K, C] is both orders; a larger one's taps are [K, C]
  // blocks of a [K, R, S, C] dW (the caller transposes it).
  bool writes_kcrs() const override { return s_.r == 1 && s_.s == 1; }
  DType dw_dtype() const override { return DType::f32; }
  std::size_t workspace_bytes() const override { return plan_.workspace_bytes; }
  int rank() const { return rank_; }
  std::string engine() const override {
    return gemm_wgrad_engine_name(GemmWgradForm::shifted_rows, s_, plan_.in_place, cap_, rank_);
  }

  void run(const GpuHandles& h, const void* x, const void* dy, void* dw,
           void* workspace) const override {
    const std::size_t bytes = dtype_size(s_.dtype), taps = s_.r * s_.s;
    const Device dev = Device::cuda(0);
    for (std::size_t chunk = 0; chunk < plan_.chunks; ++chunk) {
      const ChunkImages images = chunk_images(plan_, s_, chunk);
      const auto* xs = static_cast<const char*>(x) + images.first * s_.h * s_.w * s_.c * bytes;
      const auto* dys = static_cast<const char*>(dy) + images.first * s_.p * s_.q * s_.k * bytes;
      std::size_t rows = images.count * s_.h * s_.w;
      if (!plan_.in_place) {
        kernels::PaddedRows xr = plan_.x_grid, dyr = plan_.dy_grid;
        xr.images = dyr.images = images.count;
        auto* xg = static_cast<char*>(workspace);
        char* dyg = xg + plan_.dy_offset;
        kernels::pad_rows_cuda(xs, xg, xr, s_.c, h.stream);
        kernels::pad_rows_cuda(dys, dyg, dyr, s_.k, h.stream);
        xs = xg;
        dys = dyg;
        rows = dyr.rows();
      }
      // Tap (r, q): dW[:, r, q, :] (+)= dyᵀ x shifted by its rows.
      const BufferView a{const_cast<char*>(dys), rows * s_.k, s_.dtype, dev};
      for (std::size_t r = 0; r < s_.r; ++r)
        for (std::size_t q = 0; q < s_.s; ++q) {
          const BufferView b{const_cast<char*>(xs) + plan_.row_shift(r, q) * s_.c * bytes,
                             rows * s_.c, s_.dtype, dev};
          float* block = static_cast<float*>(dw) + (r * s_.s + q) * s_.c;
          const BufferView d{block, (s_.k - 1) * taps * s_.c + s_.c, DType::f32, dev};
          gpu_lt_gemm(h, /*trans_a=*/true, /*trans_b=*/false, s_.k, s_.c, rows, a, s_.k, b, s_.c,
                      chunk == 0 ? 0.0f : 1.0f, d, taps * s_.c, nullptr, nullptr, false, rank_);
        }
    }
  }

 private:
  ConvGraphShape s_;
  ShiftedWgradPlan plan_;
  std::size_t cap_;
  int rank_;
};

// dW [K, R, S, C] = dyᵀ u per chunk of images: dy read in place, u the
// chunk's unfolded input in the workspace.
class UnfoldedGemmWgrad final : public ConvWgradGraph {
 public:
  UnfoldedGemmWgrad(const ConvGraphShape& shape, const UnfoldedWgradPlan& plan, std::size_t cap,
                    int rank)
      : s_(shape), plan_(plan), cap_(cap), rank_(rank) {}

  bool writes_kcrs() const override { return s_.r == 1 && s_.s == 1; }
  DType dw_dtype() const override { return DType::f32; }
  std::size_t workspace_bytes() const override { return plan_.workspace_bytes; }
  int rank() const { return rank_; }
  std::string engine() const override {
    return gemm_wgrad_engine_name(GemmWgradForm::unfolded_input, s_, false, cap_, rank_);
  }

  void run(const GpuHandles& h, const void* x, const void* dy, void* dw,
           void* workspace) const override {
    const std::size_t bytes = dtype_size(s_.dtype), width = s_.r * s_.s * s_.c;
    const Device dev = Device::cuda(0);
    // The GEMMs' D: dW, or its staging rows of dw_ld floats (16-byte aligned).
    void* d = plan_.stages_dw() ? static_cast<char*>(workspace) + plan_.dw_offset : dw;
    for (std::size_t chunk = 0; chunk < plan_.chunks; ++chunk) {
      const std::size_t first = chunk * plan_.images_per_chunk;
      kernels::UnfoldedTaps g = plan_.unfolded;
      g.images = std::min(plan_.images_per_chunk, s_.n - first);
      const auto* xs = static_cast<const char*>(x) + first * s_.h * s_.w * s_.c * bytes;
      const auto* dys = static_cast<const char*>(dy) + first * s_.p * s_.q * s_.k * bytes;
      kernels::unfold_taps_cuda(xs, workspace, g, h.stream);
      const std::size_t rows = g.rows();
      gpu_lt_gemm(h, /*trans_a=*/true, /*trans_b=*/false, s_.k, width, rows,
                  BufferView{const_cast<char*>(dys), rows * s_.k, s_.dtype, dev}, s_.k,
                  BufferView{workspace, rows * g.ld, s_.dtype, dev}, g.ld, chunk == 0 ? 0.0f : 1.0f,
                  BufferView{d, (s_.k - 1) * plan_.dw_ld + width, DType::f32, dev}, plan_.dw_ld,
                  nullptr, nullptr, false, rank_);
    }
    if (plan_.stages_dw())
      RT_CUDA_CHECK(cudaMemcpy2DAsync(dw, width * sizeof(float), d, plan_.dw_ld * sizeof(float),
                                      width * sizeof(float), s_.k, cudaMemcpyDeviceToDevice,
                                      static_cast<cudaStream_t>(h.stream)));
  }

 private:
  ConvGraphShape s_;
  UnfoldedWgradPlan plan_;
  std::size_t cap_;
  int rank_;
};

}  // namespace

std::unique_ptr<ConvWgradGraph> make_shifted_gemm_wgrad(const ConvGraphShape& shape,
                                                        std::string* why_not,
                                                        std::size_t workspace_cap, int algo_rank) {
  const std::optional<ShiftedWgradPlan> plan = plan_shifted_wgrad(shape, workspace_cap, why_not);
  if (!plan) return nullptr;
  return std::make_unique<ShiftedGemmWgrad>(shape, *plan, workspace_cap, algo_rank);
}

std::unique_ptr<ConvWgradGraph> make_unfolded_gemm_wgrad(const ConvGraphShape& shape,
                                                         std::string* why_not,
                                                         std::size_t workspace_cap, int algo_rank) {
  const std::optional<UnfoldedWgradPlan> plan = plan_unfolded_wgrad(shape, workspace_cap, why_not);
  if (!plan) return nullptr;
  return std::make_unique<UnfoldedGemmWgrad>(shape, *plan, workspace_cap, algo_rank);
}

namespace {
// The builder of `form`'s GEMMs.
auto maker(GemmWgradForm form) {
  return form == GemmWgradForm::shifted_rows ? make_shifted_gemm_wgrad : make_unfolded_gemm_wgrad;
}
}  // namespace

std::vector<std::unique_ptr<ConvWgradGraph>> gemm_wgrad_candidates(const ConvGraphShape& shape,
                                                                   std::string* why_not) {
  std::vector<std::unique_ptr<ConvWgradGraph>> out;
  for (const GemmWgradForm form : gemm_wgrad_forms(shape, why_not)) {
    const auto make = maker(form);
    std::string why;
    const auto large = make(shape, &why, kShiftedWgradWorkspaceCap, 0);
    RT_CHECK(large != nullptr,
             "conv2d weight-gradient GEMM: a form listed for the shape refused it: {}", why);
    // The 32 MiB chunking where it differs (the same chunks need the same
    // workspace; a name names its cap).
    std::vector<std::size_t> caps = {kShiftedWgradWorkspaceCap};
    if (auto cached = make(shape, &why, kShiftedWgradCacheCap, 0);
        cached && cached->workspace_bytes() != large->workspace_bytes())
      caps.push_back(kShiftedWgradCacheCap);
    // Each with the heuristic's first kGemmWgradRanks algorithms: its first
    // is ranked by a model of the GPU, not by a run, and these products (a
    // few thousand outputs summed over up to millions of rows) are not its
    // usual shape; the timing picks among them.
    for (int rank = 0; rank < kGemmWgradRanks; ++rank)
      for (const std::size_t cap : caps) out.push_back(make(shape, &why, cap, rank));
  }
  return out;
}

std::unique_ptr<ConvWgradGraph> gemm_wgrad_named(const ConvGraphShape& shape,
                                                 const std::string& engine) {
  std::string why;
  for (const GemmWgradForm form : gemm_wgrad_forms(shape, &why)) {
    const auto make = maker(form);
    for (const std::size_t cap : {kShiftedWgradWorkspaceCap, kShiftedWgradCacheCap})
      for (int rank = 0; rank < kGemmWgradRanks; ++rank)
        if (auto g = make(shape, &why, cap, rank); g && g->engine() == engine) return g;
  }
  return nullptr;
}

bool gemm_wgrad_sure(const ConvGraphShape& shape, const ConvWgradGraph& graph) {
  if (const auto* g = dynamic_cast<const ShiftedGemmWgrad*>(&graph))
    return g->rank() == 0 && gemm_wgrad_form_aligned(shape, GemmWgradForm::shifted_rows);
  if (const auto* g = dynamic_cast<const UnfoldedGemmWgrad*>(&graph))
    return g->rank() == 0 && gemm_wgrad_form_aligned(shape, GemmWgradForm::unfolded_input);
  return false;
}

}  // namespace ringtrain::detail
