#include "train/comm_batch_stat_reducer.h"

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/core/ordering_point.h"

namespace ringtrain {

void CommBatchStatReducer::sum(float* data, std::size_t count) {
  const BufferView v{data, count, DType::f32, device_};
  comm_.order_after(OrderingPoint::record(device_, stream_));
  CommRequest r = comm_.allreduce_async(v, v, ReduceOp::sum);
  const OrderingPoint done = r.completion();
  if (done.empty())
    r.wait();  // a CPU backend (or staged GPU buffers): the host learns it is done
  else
    done.order_stream(stream_);
}

}  // namespace ringtrain
