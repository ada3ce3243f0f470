// --sync-bn: BatchNorm's per-channel sums summed over the ranks by the
// gradient communicator. On a GPU the sum runs on the communicator's stream,
// ordered after the compute stream by an event, and the compute stream waits
// for it the same way: no host sync. CPU backends finish it before returning.
#pragma once

#include <cstddef>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/device.h"
#include "ringtrain/ops/batch_norm.h"

namespace ringtrain {

class CommBatchStatReducer final : public BatchStatReducer {
 public:
  CommBatchStatReducer(Communicator& comm, Device device, void* compute_stream)
      : comm_(comm), device_(device), stream_(compute_stream) {}
  void sum(float* data, std::size_t count) override;

 private:
  Communicator& comm_;
  Device device_;
  void* stream_;
};

}  // namespace ringtrain
