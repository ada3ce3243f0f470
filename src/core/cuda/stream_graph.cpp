#include "core/stream_graph.h"

#include <cuda_runtime.h>

#include <fmt/format.h>

#include "core/cuda/check_cuda.h"
#include "ringtrain/core/check.h"

namespace ringtrain::detail {

StreamGraph::~StreamGraph() {
  release();
}

void StreamGraph::release() noexcept {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = graph_ = nullptr;
  nodes_ = 0;
}

void StreamGraph::capture(void* stream, const std::function<void()>& work,
                          const std::string& what) {
  release();
  auto s = static_cast<cudaStream_t>(stream);
  RT_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    work();
  } catch (const std::exception& e) {
    // End the capture (its graph is invalid) so that the stream is usable again.
    (void)cudaStreamEndCapture(s, &graph);
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    RT_CHECK(false, "--cuda-graph: capturing {} failed: {}", what, e.what());
  }
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  if (ended != cudaSuccess) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    RT_CHECK(false,
             "--cuda-graph: capturing {} failed: {} (a host wait, an allocation or the legacy "
             "default stream inside the captured work)",
             what, cudaGetErrorString(ended));
  }
  graph_ = graph;
  std::size_t count = 0;
  RT_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  nodes_ = count;
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  if (made != cudaSuccess) {
    release();
    (void)cudaGetLastError();
    RT_CHECK(false, "--cuda-graph: instantiating the graph of {} ({} nodes) failed: {}", what,
             count, cudaGetErrorString(made));
  }
  exec_ = exec;
}

void StreamGraph::replay(void* stream) const {
  RT_CHECK(exec_ != nullptr, "internal: a CUDA graph replayed before it was captured");
  RT_CUDA_CHECK(
      cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream)));
}

}  // namespace ringtrain::detail
