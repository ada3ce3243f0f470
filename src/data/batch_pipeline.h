// The loader thread behind Prefetcher and EvalBatches. It asks a plan for the
// indices of batch number k, reads them into slot k % (depth + 1), copies the
// slot to the device when there is one, and marks it ready. The consumer takes
// slots in order; a slot comes back when the consumer asks for the next batch,
// so at most `depth` batches wait ready while one is in use. On a GPU, uint8
// data crosses as bytes (a quarter of the floats) and is widened on the
// device, on the copy stream (data/device_widening.h). On a GPU the work
// that reads a batch may still be queued when the consumer asks for the next
// one: the consumer then passes an ordering point behind that work, and the
// copy stream waits on it before it refills the slot.
//
//   slots    [ in use ][ ready ][ ready ][ filling... blocked until a slot frees ]
//   batch        k       k+1      k+2
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/batch_staging.h"
#include "ringtrain/core/ordering_point.h"
#include "ringtrain/data/prefetcher.h"

namespace ringtrain {

class BatchPipeline {
 public:
  // Fills `indices` and `cursor` for batch number k and returns true, or
  // returns false when there is no batch k (the end of an evaluation pass).
  using Plan =
      std::function<bool(std::uint64_t k, std::vector<std::uint64_t>& indices, DataCursor& cursor)>;

  BatchPipeline(Dataset& dataset, std::size_t max_batch, Plan plan, std::size_t depth,
                Device device);
  ~BatchPipeline();
  BatchPipeline(const BatchPipeline&) = delete;
  BatchPipeline& operator=(const BatchPipeline&) = delete;

  // The next batch in order, or nullopt at the end of the plan. Releases the
  // batch handed out before, whose slot is refilled only after
  // `previous_done` (empty: it is done with now). Rethrows an error from the
  // loader thread.
  std::optional<Batch> next(const OrderingPoint& previous_done = {});

 private:
  struct Slot {
    std::unique_ptr<HostStagingBuffer> host_x, host_y;
    std::unique_ptr<DeviceStagingBuffer> dev_x, dev_y;
    std::unique_ptr<DeviceStagingBuffer> dev_bytes;  // with widening_: the bytes copied across
    std::size_t size = 0;
    DataCursor cursor;
    OrderingPoint reuse_after;  // behind the last kernel that read the slot
  };
  void run();

  Dataset& dataset_;
  std::size_t max_batch_;
  Plan plan_;
  Device device_;
  std::vector<Slot> slots_;
  std::unique_ptr<CopyStream> stream_;
  // Set on a GPU for uint8 data: host slots hold bytes, widened on the device.
  std::optional<kernels::ChannelWidening> widening_;

  std::mutex mutex_;
  std::condition_variable ready_cv_, space_cv_;
  // Batches ready. Written under mutex_; atomic so next() can poll it briefly
  // before sleeping (a sleep and wake-up costs as much as a small batch).
  std::atomic<std::uint64_t> produced_{0};
  std::uint64_t released_ = 0;  // batches the consumer is done with
  std::uint64_t handed_out_ = 0;
  bool end_ = false;
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;
};

}  // namespace ringtrain
