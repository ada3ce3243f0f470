#include "ringtrain/core/ordering_point.h"

#include "core/device_sync.h"

namespace ringtrain {

OrderingPoint OrderingPoint::record(Device device, void* stream) {
  OrderingPoint p;
  if (!device.is_cuda()) return p;  // a null stream is the legacy default stream
  void* event = detail::acquire_event();
  p.event_ = std::shared_ptr<void>(event, [](void* e) { detail::release_event(e); });
  p.device_ = device;
  detail::record_event(event, stream);
  return p;
}

void OrderingPoint::order_stream(void* stream) const {
  if (!empty()) detail::stream_wait_event(stream, event());
}

bool OrderingPoint::reached() const {
  return empty() || detail::event_reached(event());
}

}  // namespace ringtrain
