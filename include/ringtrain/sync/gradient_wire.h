// Gradients on the wire (--grad-dtype fp32|bf16|fp16): the dtype a bucket is
// reduced in. In bf16 or fp16 a bucket is narrowed from the f32 gradient
// buffer into a wire buffer (scaled on the way), reduced in that dtype, and
// widened back into the f32 gradients the optimizer reads: half the bytes on
// the wire, as Horovod's Compression.fp16 and PyTorch's bf16_compress_hook.
//
// The copies here are queued on `stream` for device buffers (the compute
// stream, so they are ordered with backward and the optimizer without the
// host) and done at once for host buffers.
#pragma once

#include <string_view>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/buffer_view.h"

namespace ringtrain {

// fp32 | bf16 | fp16 to f32, bf16, f16. Throws Error naming --grad-dtype.
DType parse_grad_dtype(std::string_view name);
// The flag's spelling of a wire dtype (fp32, bf16, fp16).
std::string_view grad_dtype_name(DType wire);

// How a bucket is reduced in `wire` when the gradients ask for `op` (avg or
// sum) over `world` ranks: f32 keeps op; bf16 and fp16 sum, after a scale of
// 1/world for avg (DESIGN.md: divide before the reduction in low precision),
// or of 1 for sum, where each rank's gradient is already divided by the
// global batch (--global-batch). Either way the result is what f32 gives.
struct WireReduction {
  ReduceOp op = ReduceOp::avg;
  float scale = 1.f;
};
WireReduction wire_reduction(DType wire, ReduceOp op, int world);

// wire[i] = grads[i] * scale in wire's 16-bit dtype; grads is f32, the counts match.
void narrow_to_wire(BufferView wire, BufferView grads, float scale, void* stream);
// grads[i] = wire[i] widened to f32.
void widen_from_wire(BufferView grads, BufferView wire, void* stream);
// dst = src (same dtype and count), on the stream for device buffers.
void copy_on_stream(BufferView dst, BufferView src, void* stream);
// dst = 0.
void zero_on_stream(BufferView dst, void* stream);

}  // namespace ringtrain
