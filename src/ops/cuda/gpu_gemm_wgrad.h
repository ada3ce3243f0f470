// The GPU's weight gradients as GEMMs: the shifted rows of a stride-1
// convolution (ops/shifted_gemm_wgrad.h; copies by kernels/shifted_rows.cu)
// and the unfolded input of a strided one (ops/unfolded_gemm_wgrad.h;
// kernels/unfolded_taps.cu), each GEMM by cuBLASLt on tensor cores (16-bit x
// and dy, fp32 accumulation and dW), behind the interface of the graph
// engines they are timed beside. Their engine names start "cublasLt-".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/cudnn_graph.h"
#include "ops/gemm_wgrad_forms.h"
#include "ops/gpu_ops.h"
#include "ops/shifted_gemm_wgrad.h"

namespace ringtrain::detail {

// nullptr where the GEMMs do not apply to `shape` (*why_not says why);
// copies within workspace_cap bytes (tests pass a small one to run chunks).
// algo_rank: which of cuBLASLt's ranked algorithms its GEMMs run (0: the
// heuristic's first; gpu_lt_gemm).
std::unique_ptr<ConvWgradGraph> make_shifted_gemm_wgrad(
    const ConvGraphShape& shape, std::string* why_not,
    std::size_t workspace_cap = kShiftedWgradWorkspaceCap, int algo_rank = 0);
std::unique_ptr<ConvWgradGraph> make_unfolded_gemm_wgrad(
    const ConvGraphShape& shape, std::string* why_not,
    std::size_t workspace_cap = kShiftedWgradWorkspaceCap, int algo_rank = 0);
// How many of cuBLASLt's ranked algorithms a plan times for each variant.
constexpr int kGemmWgradRanks = 3;
static_assert(kGemmWgradRanks <= kLtMostRanked, "gpu_lt_gemm ranks its first kLtMostRanked");
// The variants a plan times, the first ones first: each form
// gemm_wgrad_forms lists, in its order; each within
// kShiftedWgradWorkspaceCap, then within kShiftedWgradCacheCap where that
// chunks the batch otherwise (their engine names end "-256MiB" and "-32MiB":
// the cap, which a batch that was not timed plans its own chunks within);
// each with the heuristic's first kGemmWgradRanks algorithms ("-algoN" past
// the first). Empty where no form applies.
std::vector<std::unique_ptr<ConvWgradGraph>> gemm_wgrad_candidates(const ConvGraphShape& shape,
                                                                   std::string* why_not);
// The GEMM of `shape` whose engine() is `engine` (any form, cap and rank
// gemm_wgrad_candidates may list at some batch), or nullptr.
std::unique_ptr<ConvWgradGraph> gemm_wgrad_named(const ConvGraphShape& shape,
                                                 const std::string& engine);
// Whether `graph` is one of these that may run untried for `shape`: the
// heuristic's first algorithm (rank 0) of a form whose operands are all
// 16-byte aligned (gemm_wgrad_form_aligned), where cuBLASLt surely has one.
bool gemm_wgrad_sure(const ConvGraphShape& shape, const ConvWgradGraph& graph);

}  // namespace ringtrain::detail
