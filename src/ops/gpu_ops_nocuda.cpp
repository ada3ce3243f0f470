// CPU-only build: no op can run on a GPU. ComputeContext::create already
// refuses a CUDA device, so these only fire if that guard is bypassed.
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"

namespace ringtrain::detail {

namespace {
[[noreturn]] void no_cuda(const char* op) {
  RT_CHECK(false, "cannot run {} on a CUDA device: this ringtrain was built without CUDA", op);
  __builtin_unreachable();
}
}  // namespace

GpuHandles gpu_handles_create(int ordinal, Tf32Mode, DType) {
  RT_CHECK(false,
           "cannot create a compute context on cuda:{}: this ringtrain was built without CUDA "
           "(use --device cpu, or rebuild with -DRINGTRAIN_CUDA=ON)",
           ordinal);
  __builtin_unreachable();
}
void gpu_handles_destroy(const GpuHandles&) noexcept {}
std::size_t conv_graphs_built(const GpuHandles&) {
  return 0;
}
float* gpu_widening_buffer(const GpuHandles&, int, std::size_t) {
  no_cuda("a widening scratch");
}
void gpu_stream_synchronize(void*) {
  no_cuda("a stream synchronize");
}
void gpu_copy_to_host(void*, const void*, std::size_t, void*) {
  no_cuda("a device-to-host copy");
}
void gpu_gemm(const GpuHandles&, bool, bool, std::size_t, std::size_t, std::size_t, float,
              const float*, std::size_t, const float*, std::size_t, float, float*, std::size_t,
              DType) {
  no_cuda("gemm");
}
void gpu_gemm_stored(const GpuHandles&, bool, bool, std::size_t, std::size_t, std::size_t, float,
                     BufferView, std::size_t, BufferView, std::size_t, float, float*, std::size_t) {
  no_cuda("a 16-bit GEMM");
}
bool gpu_lt_gemm(const GpuHandles&, bool, bool, std::size_t, std::size_t, std::size_t, BufferView,
                 std::size_t, BufferView, std::size_t, float, BufferView, std::size_t, const float*,
                 float*, bool, int) {
  no_cuda("a cuBLASLt GEMM");
  return false;
}
std::size_t gpu_lt_gemm_bias_apart(const GpuHandles&) {
  return 0;
}
std::size_t gpu_lt_gemm_sums_apart(const GpuHandles&) {
  return 0;
}
bool gpu_lt_gemm_gelu_aux_bias(const GpuHandles&, bool, bool, std::size_t, std::size_t, std::size_t,
                               BufferView, std::size_t, BufferView, std::size_t, BufferView,
                               std::size_t, const float*, BufferView, std::size_t) {
  no_cuda("a cuBLASLt GEMM");
}
std::size_t gpu_lt_gemm_gelu_refused(const GpuHandles&) {
  return 0;
}
LinearDgeluRan gpu_lt_gemm_dgelu(const GpuHandles&, bool, bool, std::size_t, std::size_t,
                                 std::size_t, BufferView, std::size_t, BufferView, std::size_t,
                                 BufferView, std::size_t, BufferView, std::size_t, float*, bool) {
  no_cuda("a cuBLASLt GEMM");
}
std::size_t gpu_lt_gemm_dgelu_bgrad_refused(const GpuHandles&) {
  return 0;
}
std::size_t gpu_lt_gemm_dgelu_refused(const GpuHandles&) {
  return 0;
}
std::shared_ptr<LtGemmCache> make_lt_gemm_cache() {
  no_cuda("a cuBLASLt GEMM");
}
void gpu_to_precision_bits(void*, std::uint16_t*, const float*, std::size_t, DType) {
  no_cuda("a 16-bit cast");
}
void gpu_from_precision_bits(void*, float*, const std::uint16_t*, std::size_t, DType) {
  no_cuda("a 16-bit cast");
}
void gpu_relu_forward(void*, const float*, float*, std::size_t) {
  no_cuda("relu");
}
void gpu_relu_backward(void*, const float*, const float*, float*, std::size_t) {
  no_cuda("relu");
}
void gpu_gelu_forward(void*, const float*, float*, std::size_t) {
  no_cuda("gelu");
}
void gpu_gelu_backward(void*, const float*, const float*, float*, std::size_t) {
  no_cuda("gelu");
}
void gpu_bias_add(void*, BufferView, BufferView, const float*, std::size_t, std::size_t,
                  std::size_t) {
  no_cuda("bias_add");
}
void gpu_bias_grad(const GpuHandles&, BufferView, float*, std::size_t, std::size_t, std::size_t,
                   bool) {
  no_cuda("bias_grad");
}
void gpu_bias_relu(void*, BufferView, BufferView, const float*, std::size_t, std::size_t,
                   std::size_t) {
  no_cuda("bias_relu");
}
void gpu_relu_mask_bias_grad(const GpuHandles&, BufferView, BufferView, BufferView, float*,
                             std::size_t, std::size_t, std::size_t, bool) {
  no_cuda("bias_relu");
}
void gpu_softmax_ce_forward(void*, BufferView, const std::int32_t*, std::size_t, std::size_t,
                            std::size_t, float*, std::int32_t*, float, const std::int32_t*, float) {
  no_cuda("softmax cross-entropy");
}
void gpu_softmax_ce_backward(void*, BufferView, const std::int32_t*, std::size_t, std::size_t,
                             std::size_t, float, BufferView, float, const std::int32_t*, float) {
  no_cuda("softmax cross-entropy");
}
void gpu_softmax_ce_forward_backward(void*, BufferView, const std::int32_t*, std::size_t,
                                     std::size_t, std::size_t, float, BufferView, float*,
                                     std::int32_t*, float, const std::int32_t*, float) {
  no_cuda("softmax cross-entropy");
}
void gpu_loss_totals_add(void*, const float*, const std::int32_t*, std::size_t, double*) {
  no_cuda("loss totals");
}
void gpu_dropout_apply(void*, BufferView, BufferView, std::uint64_t, float, float, std::size_t,
                       std::size_t) {
  no_cuda("dropout");
}
void gpu_gelu_tanh_forward(void*, const float*, float*, std::size_t) {
  no_cuda("gelu_tanh");
}
void gpu_gelu_tanh_backward(void*, const float*, const float*, float*, std::size_t) {
  no_cuda("gelu_tanh");
}
void gpu_gemm_strided_batched(const GpuHandles&, bool, bool, std::size_t, std::size_t, std::size_t,
                              float, const float*, std::size_t, std::size_t, const float*,
                              std::size_t, std::size_t, float, float*, std::size_t, std::size_t,
                              std::size_t) {
  no_cuda("a batched gemm");
}
void gpu_token_embedding_forward(void*, const float*, const float*, std::size_t, std::size_t,
                                 std::size_t, BufferView) {
  no_cuda("token_embedding");
}
std::size_t gpu_token_embedding_backward_workspace_bytes(std::size_t, std::size_t) {
  no_cuda("token_embedding");
}
void gpu_token_embedding_backward(void*, const float*, BufferView, std::size_t, std::size_t,
                                  std::size_t, float*, bool, void*, std::size_t) {
  no_cuda("token_embedding");
}
void gpu_add_broadcast_rows(void*, const float*, const float*, float*, std::size_t, std::size_t) {
  no_cuda("position_embedding");
}
void gpu_layer_norm_forward(void*, BufferView, const float*, const float*, std::size_t, std::size_t,
                            float, BufferView, float*, float*) {
  no_cuda("layer_norm");
}
void gpu_layer_norm_backward(void*, BufferView, const float*, BufferView, std::size_t, std::size_t,
                             const float*, const float*, BufferView) {
  no_cuda("layer_norm");
}
void gpu_layer_norm_param_grad(const GpuHandles&, BufferView, BufferView, std::size_t, std::size_t,
                               const float*, const float*, float*, float*, bool) {
  no_cuda("layer_norm");
}
void gpu_causal_softmax_forward(void*, const float*, float*, std::size_t, std::size_t) {
  no_cuda("causal_self_attention");
}
void gpu_causal_softmax_backward(void*, const float*, const float*, float*, std::size_t,
                                 std::size_t, float) {
  no_cuda("causal_self_attention");
}
void gpu_zero(void*, void*, std::size_t) {
  no_cuda("a device fill");
}
void gpu_fill_bytes(void*, void*, std::size_t, unsigned char) {
  no_cuda("a device fill");
}
std::unique_ptr<GpuConvPlan> make_gpu_conv_plan(const GpuHandles&, const Conv2dGeometry&,
                                                std::size_t) {
  no_cuda("conv2d");
}
void gpu_pool2d_forward(void*, const kernels::PoolShape&, std::size_t, bool, bool, BufferView,
                        BufferView, std::int32_t*, std::size_t) {
  no_cuda("pool2d");
}
void gpu_pool2d_backward(void*, const kernels::PoolShape&, std::size_t, bool, bool, BufferView,
                         const std::int32_t*, BufferView, std::size_t) {
  no_cuda("pool2d");
}

void gpu_batch_norm_welford(const GpuHandles&, BufferView, std::size_t, std::size_t, std::size_t,
                            float*, float*, float*, float*) {
  no_cuda("batch_norm");
}
void gpu_batch_norm_welford_ranks(void*, float*, std::size_t, float, float*, const float*, float*) {
  no_cuda("batch_norm");
}
void gpu_batch_norm_finalize(void*, const float*, const float*, std::size_t, float, float, bool,
                             const float*, float*, float*, float*) {
  no_cuda("batch_norm");
}
void gpu_batch_norm_eval_stats(void*, const float*, const float*, std::size_t, float, float*,
                               float*) {
  no_cuda("batch_norm");
}
void gpu_batch_norm_apply(void*, BufferView, BufferView, std::size_t, std::size_t, std::size_t,
                          const float*, const float*, const float*, const float*, DType) {
  no_cuda("batch_norm");
}
void gpu_residual_layer_norm_forward(void*, BufferView, BufferView, float, const float*,
                                     const float*, std::size_t, std::size_t, float, BufferView,
                                     BufferView, float*, float*) {
  no_cuda("residual_layer_norm");
}
void gpu_residual_layer_norm_backward(void*, BufferView, const float*, BufferView, std::size_t,
                                      std::size_t, const float*, const float*, BufferView, bool,
                                      float, BufferView, BufferView) {
  no_cuda("residual_layer_norm");
}
void gpu_batch_norm_relu_apply(void*, BufferView, BufferView, BufferView, std::size_t, std::size_t,
                               std::size_t, const float*, const float*, const float*, const float*,
                               DType) {
  no_cuda("batch_norm_relu");
}
void gpu_batch_norm_relu_backward_reduce(const GpuHandles&, BufferView, BufferView, BufferView,
                                         BufferView, BufferView, std::size_t, std::size_t,
                                         std::size_t, const float*, const float*, const float*,
                                         const float*, float*, float*, float*, bool) {
  no_cuda("batch_norm_relu");
}
void gpu_batch_norm_relu_backward_dx(void*, BufferView, BufferView, BufferView, BufferView,
                                     BufferView, BufferView, std::size_t, std::size_t, std::size_t,
                                     const float*, const float*, const float*, const float*,
                                     const float*, const float*, DType) {
  no_cuda("batch_norm_relu");
}
void gpu_batch_norm_backward_reduce(const GpuHandles&, BufferView, BufferView, std::size_t,
                                    std::size_t, std::size_t, const float*, const float*, float*,
                                    float*, float*, bool) {
  no_cuda("batch_norm");
}
void gpu_batch_norm_backward_dx(void*, BufferView, BufferView, BufferView, std::size_t, std::size_t,
                                std::size_t, const float*, const float*, const float*, const float*,
                                const float*, DType) {
  no_cuda("batch_norm");
}
void gpu_global_avg_pool_forward(void*, BufferView, BufferView, std::size_t, std::size_t,
                                 std::size_t, bool) {
  no_cuda("global_avg_pool");
}
void gpu_global_avg_pool_backward(void*, BufferView, BufferView, std::size_t, std::size_t,
                                  std::size_t, bool) {
  no_cuda("global_avg_pool");
}
void gpu_transpose_batched(void*, BufferView, BufferView, std::size_t, std::size_t, std::size_t) {
  no_cuda("a layout transpose");
}
void gpu_relu_forward_stored(void*, BufferView, BufferView) {
  no_cuda("relu");
}
void gpu_relu_backward_stored(void*, BufferView, BufferView, BufferView) {
  no_cuda("relu");
}
void gpu_gelu_tanh_forward_stored(void*, BufferView, BufferView) {
  no_cuda("gelu");
}
void gpu_gelu_tanh_backward_stored(void*, BufferView, BufferView, BufferView) {
  no_cuda("gelu");
}
void gpu_sum_two_stored(void*, BufferView, BufferView, BufferView, float) {
  no_cuda("an add");
}
void gpu_add_widened(void*, BufferView, BufferView) {
  no_cuda("an add");
}
void gpu_narrow_sum(void*, BufferView, BufferView, std::span<const BufferView>) {
  no_cuda("a gradient sum");
}
void gpu_scale_stored(void*, BufferView, BufferView, float) {
  no_cuda("a scale");
}
void gpu_convert_blocks(void*, BufferView, std::size_t, BufferView, std::size_t, std::size_t,
                        std::size_t) {
  no_cuda("a block conversion");
}
void gpu_axpy(void*, float, const float*, float*, std::size_t) {
  no_cuda("an axpy");
}
void gpu_axpy_rounded(void*, float, const float*, const float*, float*, std::size_t, DType) {
  no_cuda("an axpy");
}
void gpu_scale(void*, float*, std::size_t, float) {
  no_cuda("a scale");
}
void gpu_round_to_precision(void*, float*, const float*, std::size_t, DType) {
  no_cuda("low-precision rounding");
}
void gpu_copy_blocks(void*, void*, std::size_t, const void*, std::size_t, std::size_t, std::size_t,
                     bool) {
  no_cuda("a block copy");
}

}  // namespace ringtrain::detail
