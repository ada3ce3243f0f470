// A CPU-only build has no cuDNN: every graph is "not available", and the
// callers keep their own paths (ops/cudnn_graph.h).
#include "ops/cudnn_graph.h"

namespace ringtrain::detail {

std::unique_ptr<ConvWgradGraph> ConvWgradGraph::build(const GpuHandles&, const ConvGraphShape&,
                                                      std::string* why_not) {
  if (why_not != nullptr) *why_not = "a CPU-only build has no cuDNN";
  return nullptr;
}

std::vector<std::unique_ptr<ConvWgradGraph>> ConvWgradGraph::candidates(const GpuHandles&,
                                                                        const ConvGraphShape&,
                                                                        DType, const EngineWanted&,
                                                                        std::string* why_not) {
  if (why_not != nullptr) *why_not = "a CPU-only build has no cuDNN";
  return {};
}

std::vector<std::unique_ptr<ConvDataGraph>> ConvDataGraph::candidates(const GpuHandles&,
                                                                      const ConvGraphShape&,
                                                                      ConvDataOp,
                                                                      const EngineWanted&,
                                                                      std::string* why_not) {
  if (why_not != nullptr) *why_not = "a CPU-only build has no cuDNN";
  return {};
}

std::unique_ptr<ConvDataGraph> ConvDataGraph::build(const GpuHandles&, const ConvGraphShape&,
                                                    ConvDataOp, std::string* why_not) {
  if (why_not != nullptr) *why_not = "a CPU-only build has no cuDNN";
  return nullptr;
}

const char* conv_heuristics_mode_name() {
  return "none (a CPU-only build)";
}

std::unique_ptr<AttentionGraphs> AttentionGraphs::build(const GpuHandles&, const AttentionShape&,
                                                        std::string* why_not) {
  if (why_not != nullptr) *why_not = "a CPU-only build has no cuDNN";
  return nullptr;
}

}  // namespace ringtrain::detail
