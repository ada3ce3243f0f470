// The elementwise GPU ops: thin forwards to the launchers in kernels/*.h.
#include "kernels/activation.h"
#include "kernels/bias.h"
#include "kernels/bias_relu.h"
#include "kernels/dropout.h"
#include "kernels/softmax_cross_entropy.h"
#include "kernels/stored_elementwise.h"
#include "ops/gpu_ops.h"
#include "ringtrain/ops/merge.h"

namespace ringtrain::detail {

void gpu_relu_forward(void* stream, const float* x, float* y, std::size_t n) {
  kernels::relu_forward_cuda(x, y, n, stream);
}
void gpu_relu_backward(void* stream, const float* y, const float* dy, float* dx, std::size_t n) {
  kernels::relu_backward_cuda(y, dy, dx, n, stream);
}
void gpu_relu_forward_stored(void* stream, BufferView x, BufferView y) {
  kernels::relu_forward_stored_cuda(x.ptr, y.ptr, y.dtype, y.count, stream);
}
void gpu_relu_backward_stored(void* stream, BufferView y, BufferView dy, BufferView dx) {
  kernels::relu_backward_stored_cuda(y.ptr, dy.ptr, dy.dtype, dx.ptr, dx.dtype, dx.count, stream);
}
void gpu_gelu_tanh_forward_stored(void* stream, BufferView x, BufferView y) {
  kernels::gelu_tanh_forward_stored_cuda(x.ptr, y.ptr, y.dtype, y.count, stream);
}
void gpu_gelu_tanh_backward_stored(void* stream, BufferView x, BufferView dy, BufferView dx) {
  kernels::gelu_tanh_backward_stored_cuda(x.ptr, dy.ptr, dy.dtype, dx.ptr, dx.dtype, dx.count,
                                          stream);
}
void gpu_sum_two_stored(void* stream, BufferView y, BufferView x0, BufferView x1, float a) {
  kernels::sum_two_stored_cuda(x0.ptr, x1.ptr, a, y.ptr, y.dtype, y.count, stream);
}
void gpu_add_widened(void* stream, BufferView y, BufferView x) {
  kernels::add_widened_cuda(x.ptr, x.dtype, y.as<float>(), y.count, stream);
}
void gpu_narrow_sum(void* stream, BufferView narrowed, BufferView sum,
                    std::span<const BufferView> terms) {
  static_assert(kernels::NarrowSumTerms::kMax == kNarrowSumMaxTerms);
  kernels::NarrowSumTerms t;
  t.count = static_cast<unsigned>(terms.size());
  for (std::size_t k = 0; k < terms.size(); ++k) t.term[k] = terms[k].ptr;
  kernels::narrow_sum_cuda(narrowed.ptr, narrowed.dtype, sum.as<const float>(), t, terms[0].dtype,
                           sum.count, stream);
}
void gpu_scale_stored(void* stream, BufferView y, BufferView x, float a) {
  kernels::scale_stored_cuda(x.ptr, x.dtype, a, y.ptr, y.dtype, y.count, stream);
}
void gpu_convert_blocks(void* stream, BufferView dst, std::size_t dst_pitch, BufferView src,
                        std::size_t src_pitch, std::size_t width, std::size_t rows) {
  kernels::convert_blocks_cuda(dst.ptr, dst.dtype, dst_pitch, src.ptr, src.dtype, src_pitch, width,
                               rows, stream);
}
void gpu_gelu_forward(void* stream, const float* x, float* y, std::size_t n) {
  kernels::gelu_forward_cuda(x, y, n, stream);
}
void gpu_gelu_backward(void* stream, const float* x, const float* dy, float* dx, std::size_t n) {
  kernels::gelu_backward_cuda(x, dy, dx, n, stream);
}
void gpu_bias_add(void* stream, BufferView y, BufferView x, const float* bias, std::size_t outer,
                  std::size_t channels, std::size_t inner) {
  kernels::bias_add_cuda(x.ptr, x.dtype, y.ptr, y.dtype, bias, outer, channels, inner, stream);
}
void gpu_bias_grad(const GpuHandles& h, BufferView dy, float* dbias, std::size_t outer,
                   std::size_t channels, std::size_t inner, bool accumulate) {
  kernels::bias_grad_cuda(dy.ptr, dy.dtype, dbias, outer, channels, inner, accumulate, h.scratch,
                          kGpuScratchFloats, h.stream);
}
void gpu_bias_relu(void* stream, BufferView y, BufferView x, const float* bias, std::size_t outer,
                   std::size_t channels, std::size_t inner) {
  kernels::bias_relu_cuda(x.ptr, x.dtype, y.ptr, y.dtype, bias, outer, channels, inner, stream);
}
void gpu_relu_mask_bias_grad(const GpuHandles& h, BufferView y, BufferView dy, BufferView masked,
                             float* dbias, std::size_t outer, std::size_t channels,
                             std::size_t inner, bool accumulate) {
  kernels::relu_mask_bias_grad_cuda(y.ptr, dy.ptr, dy.dtype, masked.ptr, masked.dtype, dbias, outer,
                                    channels, inner, accumulate, h.scratch, kGpuScratchFloats,
                                    h.stream);
}
void gpu_softmax_ce_forward(void* stream, BufferView logits, const std::int32_t* labels,
                            std::size_t rows, std::size_t classes, std::size_t stride,
                            float* row_loss, std::int32_t* row_correct, float smoothing,
                            const std::int32_t* second, float lam) {
  kernels::softmax_ce_forward_cuda(logits.ptr, logits.dtype, labels, rows, classes, stride,
                                   row_loss, row_correct, smoothing, second, lam, stream);
}
void gpu_softmax_ce_backward(void* stream, BufferView logits, const std::int32_t* labels,
                             std::size_t rows, std::size_t classes, std::size_t stride, float scale,
                             BufferView dlogits, float smoothing, const std::int32_t* second,
                             float lam) {
  kernels::softmax_ce_backward_cuda(logits.ptr, logits.dtype, labels, rows, classes, stride, scale,
                                    dlogits.ptr, dlogits.dtype, smoothing, second, lam, stream);
}
void gpu_softmax_ce_forward_backward(void* stream, BufferView logits, const std::int32_t* labels,
                                     std::size_t rows, std::size_t classes, std::size_t stride,
                                     float scale, BufferView dlogits, float* row_loss,
                                     std::int32_t* row_correct, float smoothing,
                                     const std::int32_t* second, float lam) {
  kernels::softmax_ce_forward_backward_cuda(logits.ptr, logits.dtype, labels, rows, classes, stride,
                                            scale, dlogits.ptr, dlogits.dtype, row_loss,
                                            row_correct, smoothing, second, lam, stream);
}
void gpu_loss_totals_add(void* stream, const float* row_loss, const std::int32_t* row_correct,
                         std::size_t rows, double* totals) {
  kernels::loss_totals_add_cuda(row_loss, row_correct, rows, totals, stream);
}
void gpu_dropout_apply(void* stream, BufferView x, BufferView y, std::uint64_t key, float p,
                       float keep_scale, std::size_t channels, std::size_t hw) {
  kernels::dropout_apply_cuda(x.ptr, x.dtype, y.ptr, y.dtype, y.count, key, p, keep_scale, stream,
                              channels, hw);
}

}  // namespace ringtrain::detail
