// A CPU-only build has no CUDA graphs: capturing one is an Error.
#include "core/stream_graph.h"

#include "ringtrain/core/check.h"

namespace ringtrain::detail {

StreamGraph::~StreamGraph() = default;

void StreamGraph::release() noexcept {}

void StreamGraph::capture(void*, const std::function<void()>&, const std::string& what) {
  RT_CHECK(false, "--cuda-graph: cannot capture {}: this ringtrain was built without CUDA", what);
}

void StreamGraph::replay(void*) const {
  RT_CHECK(false, "--cuda-graph: this ringtrain was built without CUDA");
}

}  // namespace ringtrain::detail
