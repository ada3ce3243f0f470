// The one way to copy a buffer: typed views, so the byte count comes from the
// views, never from a caller's arithmetic. Either side may be the CPU or a GPU.
#pragma once

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/core/ordering_point.h"

namespace ringtrain {

// Copies all of `src` into the front of `dst` and returns when `dst` holds the
// data. The dtypes must match and `dst` must be at least as long, else Error.
// `after`: work on another stream that produced `src` (or still reads `dst`);
// the copy is queued behind it on the device, without the host waiting for it
// separately. A copy to or from host memory counts as one host sync.
void copy_view(BufferView dst, BufferView src, const OrderingPoint& after = {});

}  // namespace ringtrain
