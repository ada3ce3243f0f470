// A CUDA graph of one stream's work (--cuda-graph): the work is captured once
// and then replayed as one launch, so a step of many small kernels costs one
// launch from the host instead of hundreds. Without CUDA types, so that
// backend-neutral code can hold one; a CPU-only build answers with an Error
// (stream_graph_nocuda.cpp).
//
// What a replay repeats is exactly what the capture queued: the same kernels
// with the same arguments on the same buffers. Work whose arguments change
// from step to step (dropout keys, an AdamW step's bias correction, a loss
// scale) stays outside the graph, or the caller refuses to capture it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace ringtrain::detail {

class StreamGraph {
 public:
  StreamGraph() = default;
  StreamGraph(const StreamGraph&) = delete;
  StreamGraph& operator=(const StreamGraph&) = delete;
  ~StreamGraph();

  // Runs `work` with `stream` under capture (thread-local mode), then
  // instantiates what it queued. A call inside `work` that a capture cannot
  // hold (a host wait, an allocation, the legacy default stream) fails the
  // capture: the Error names `what` and CUDA's reason, and nothing is kept.
  void capture(void* stream, const std::function<void()>& work, const std::string& what);
  // Launches the captured work on `stream` (host-asynchronous).
  void replay(void* stream) const;
  bool captured() const { return exec_ != nullptr; }
  // Kernel, copy and other nodes in the captured graph.
  std::size_t nodes() const { return nodes_; }

 private:
  void release() noexcept;
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
  std::size_t nodes_ = 0;
};

// A replay reads and writes the addresses its capture recorded. Code that
// frees a buffer a capture may have recorded and allocates another in its
// place (a workspace or scratch grown for a larger batch, e.g. by an
// evaluation pass between training steps) calls note_graph_buffers_moved();
// whoever keeps graphs compares graph_buffers_generation() with its value at
// their capture and captures again where it moved, instead of replaying into
// freed memory. Backend-neutral (stream_graph_generation.cpp).
void note_graph_buffers_moved() noexcept;
std::uint64_t graph_buffers_generation() noexcept;

}  // namespace ringtrain::detail
