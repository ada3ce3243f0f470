// The GPU's shifted-rows weight gradient (ops/shifted_gemm_wgrad.h): the
// copies by kernels/shifted_rows.cu, each tap's GEMM by cuBLASLt on tensor
// cores (16-bit x and dy, fp32 accumulation and dW), behind the interface of
// the graph engines it is timed beside.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ops/cudnn_graph.h"
#include "ops/shifted_gemm_wgrad.h"

namespace ringtrain::detail {

// nullptr where the GEMMs do not apply to `shape` (*why_not says why);
// copies within workspace_cap bytes (tests pass a small one to run chunks).
std::unique_ptr<ConvWgradGraph> make_shifted_gemm_wgrad(
    const ConvGraphShape& shape, std::string* why_not,
    std::size_t workspace_cap = kShiftedWgradWorkspaceCap);
// The variants a plan times: within kShiftedWgradWorkspaceCap, then within
// kShiftedWgradCacheCap where that chunks the batch otherwise (their engine
// names differ by the chunk count). Empty where the GEMMs do not apply.
std::vector<std::unique_ptr<ConvWgradGraph>> shifted_gemm_wgrads(const ConvGraphShape& shape,
                                                                 std::string* why_not);

}  // namespace ringtrain::detail
