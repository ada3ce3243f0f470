// The GPU half of every op, behind plain C++ signatures (no CUDA headers), so
// the backend-neutral ops in src/ops/*.cpp can call it in any build. CUDA
// builds implement it in src/ops/cuda/*.cpp (cuBLAS, cuDNN, kernels/*.cu);
// CPU-only builds in gpu_ops_nocuda.cpp, where every call is an Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "kernels/pool2d.cuh"
#include "ringtrain/core/buffer_view.h"
#include "ringtrain/ops/conv2d.h"
#include "ringtrain/ops/linear_dgelu.h"
#include "ringtrain/ops/pool2d.h"

namespace ringtrain::detail {

struct LtGemmCache;  // cuBLASLt's state of a context (src/ops/cuda/cublaslt_gemm.cpp)

// A context's transient fp32 buffers, one op at a time in stream order, grown
// by need (on a shape's first, eager step) rather than reserved for the
// largest operand of the model:
// - buffers 0 and 1 hold x and dy widened to fp32 where cuDNN's graph API
//   has no 16-bit weight-gradient engine for a shape;
// - buffer 0 holds cuDNN's 16-bit dx where a caller asks for an fp32 dx (the
//   model does not: where it sums a convolution's dx in fp32 it takes the
//   16-bit dx and widens it as it adds it, StoresActivations::writes_dx_on_grid);
// - buffers 2 and 3 are a convolution's filter-sized scratch (any precision),
//   within one call: 2 a weight gradient beside dw (accumulated, or misaligned for the
//   graph API), 3 a channels-last [K, R, S, C] filter or weight gradient.
//   Shared by every convolution of the context, they are sized for its
//   largest filter (resnet50: 9.4 MB each), where each plan held its own
//   (resnet50 channels-last: 281 MB in all).
struct WideningScratch {
  static constexpr int kCount = 4;
  float* buffers[kCount] = {};
  std::size_t capacity[kCount] = {};  // floats
};

// What a GPU context holds: the stream, the library handles bound to it, the
// TF32 choice, and a small device scratch for the multi-block reductions
// (bias gradients), allocated once with the context so that no op allocates.
// Ops on one context run in stream order, so they may share the scratch.
struct GpuHandles {
  void* stream = nullptr;
  void* blas = nullptr;  // math mode set from tf32 at creation
  // cuBLAS's workspace, owned: given to it at creation, so that a captured
  // step's GEMMs use it rather than an allocation of their own in each graph.
  void* blas_workspace = nullptr;
  void* dnn = nullptr;
  bool conv_tf32 = false;    // cuDNN convolutions may use TF32 tensor cores
  float* scratch = nullptr;  // kGpuScratchFloats floats, owned
  // cuBLASLt's handle, workspace and per-shape algorithms for the stored
  // products (gpu_lt_gemm), made on first use, freed with the handles.
  std::shared_ptr<LtGemmCache> lt;
  // The cuDNN workspace every convolution of the context shares (they run in
  // stream order); grown by the plans, freed with the handles.
  std::shared_ptr<void> conv_workspace;
  // The graph-API graphs of the context's convolutions, by shape (and the
  // reason for a shape cuDNN refused): built once however many layers share
  // the shape (gpu_conv_plan.cpp).
  std::shared_ptr<void> conv_graphs;
  // --precision: the storage dtype of the context's activations.
  DType precision = DType::f32;
  // The context's transient fp32 scratch (WideningScratch: widened operands,
  // the convolutions' filter scratch), owned; behind a
  // pointer so that a plan holding const handles can grow it.
  std::shared_ptr<WideningScratch> widening;
  // The state that the context's attention layers share (their cuDNN graphs
  // by shape, refusals included, the workspace, dO and dQKV: opaque here,
  // ops/tensor_core_attention.cpp), made by the first layer; it lives with
  // the context.
  std::shared_ptr<std::shared_ptr<void>> attention;
};
// An empty shared convolution workspace, and an empty cache of convolution
// graphs (gpu_conv_plan.cpp).
std::shared_ptr<void> make_conv_workspace();
std::shared_ptr<void> make_conv_graph_cache();
// Drops h's cached convolution graphs (the plans that share one keep it).
void release_conv_graphs(const GpuHandles& h) noexcept;
// How many convolution graphs h has built or had refused (one per shape and
// operation): what the tests read to see the layers share them.
std::size_t conv_graphs_built(const GpuHandles& h);
constexpr std::size_t kGpuScratchFloats = std::size_t{1} << 18;  // 1 MiB

// On failure, whatever was already created is released before the Error.
GpuHandles gpu_handles_create(int ordinal, Tf32Mode tf32, DType precision = DType::f32);
// Buffer `index` (0 to 3, WideningScratch) of h's widening scratch, grown to at least
// `floats` floats (never shrunk): a transient of one op at a time, in stream
// order (the stored convolutions' widened operands, the convolutions'
// filter scratch). A growth waits for the stream, frees the
// old buffer and bumps the graph-buffers generation, so that a captured step
// is captured again; it happens on a shape's first, eager run.
float* gpu_widening_buffer(const GpuHandles& h, int index, std::size_t floats);
void gpu_handles_destroy(const GpuHandles& handles) noexcept;
void gpu_stream_synchronize(void* stream);
// Synchronous copy of bytes from device to host after the stream's work.
void gpu_copy_to_host(void* dst, const void* src, std::size_t bytes, void* stream);

void gpu_gemm(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
              std::size_t k, float alpha, const float* a, std::size_t lda, const float* b,
              std::size_t ldb, float beta, float* c, std::size_t ldc, DType precision = DType::f32);
// The same product on 16-bit tensor cores with fp32 accumulation into the
// fp32 C, both operands in the context's 16-bit dtype (read in place).
void gpu_gemm_stored(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
                     std::size_t k, float alpha, BufferView a, std::size_t lda, BufferView b,
                     std::size_t ldb, float beta, float* c, std::size_t ldc);

// The stored products through cuBLASLt (src/ops/cuda/cublaslt_gemm.cpp),
// row-major as gpu_gemm: D = op(A) op(B) + beta D with A and B of the
// context's 16-bit dtype read in place, fp32 accumulation, and D of that
// dtype (the fp32 sum rounded once, by the GEMM's own store) or fp32 (beta
// may then be 1: a weight gradient accumulated). One epilogue at most:
// - bias (fp32, n values, or null): D[i, j] = round(sum + bias[j]), the
//   bias added in fp32 before the rounding (CUBLASLT_EPILOGUE_BIAS);
// - a_sums (fp32, m values, or null): the sums of op(A)'s rows over k, the
//   bias gradient of a weight gradient dW = dyᵀ x (CUBLASLT_EPILOGUE_BGRADB),
//   overwritten, or added to where accumulate_sums (through h.scratch: the
//   epilogue cannot add), which needs m <= kGpuScratchFloats.
// The algorithm is chosen once per shape and alignment (cached in h.lt); an
// Error names the shape where cuBLASLt has none. Returns false where a_sums
// was asked for and cuBLASLt refused the bias-gradient epilogue for the shape:
// the product ran without it, and the caller reduces the sums itself.
// algo_rank -1 (the default): the heuristic's first algorithm for the
// operands' own alignments. 0 ... kLtMostRanked - 1: that one of its ranked
// algorithms, asked at alignments of at most 16 bytes, so that a choice
// timed on other buffers runs the same algorithm (the convolutions' GEMM
// weight gradients time several); an Error where it ranks fewer.
constexpr int kLtMostRanked = 4;
bool gpu_lt_gemm(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
                 std::size_t k, BufferView a, std::size_t lda, BufferView b, std::size_t ldb,
                 float beta, BufferView d, std::size_t ldd, const float* bias = nullptr,
                 float* a_sums = nullptr, bool accumulate_sums = false, int algo_rank = -1);
// How many shapes of the context's stored products had cuBLASLt refuse the
// fp32 bias with a 16-bit output, so that the GEMM wrote fp32 into a staging
// buffer and gpu_bias_add added the bias and rounded (the same numbers, the
// old round trip); 0 where the epilogue ran for all.
std::size_t gpu_lt_gemm_bias_apart(const GpuHandles& h);
// How many shapes had cuBLASLt refuse the bias-gradient epilogue (BGRADB).
std::size_t gpu_lt_gemm_sums_apart(const GpuHandles& h);
// The linear + gelu_tanh forward in one GEMM (CUBLASLT_EPILOGUE_GELU_AUX_BIAS),
// row-major as gpu_lt_gemm, all of the context's 16-bit dtype: D[i, j] =
// round(gelu_tanh(s)) and aux[i, j] (leading dimension ld_aux) = round(s), s
// = the fp32 sum plus the fp32 bias[j]. Returns false, having queued
// nothing, where cuBLASLt has no algorithm for it or aux breaks its
// documented rules (ld_aux a multiple of 8, at least n; 16-byte aligned):
// the caller then runs the unfused pair. Decided once per shape (cached in
// h.lt) and counted by gpu_lt_gemm_gelu_refused.
bool gpu_lt_gemm_gelu_aux_bias(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m,
                               std::size_t n, std::size_t k, BufferView a, std::size_t lda,
                               BufferView b, std::size_t ldb, BufferView d, std::size_t ldd,
                               const float* bias, BufferView aux, std::size_t ld_aux);
std::size_t gpu_lt_gemm_gelu_refused(const GpuHandles& h);
// The backward at that gelu, on the next linear's dx (row-major as
// gpu_lt_gemm, all of the context's 16-bit dtype, beta 0): D[i, j] =
// round(gelu_tanh'(aux[i, j]) s), s the fp32 product, aux (leading
// dimension ld_aux) the stored pre-activation, read. With bias_grad (fp32, n
// values) CUBLASLT_EPILOGUE_DGELU_BGRAD also writes its column sums there,
// overwritten, or added to where accumulate_bias_grad (through h.scratch:
// the epilogue cannot add; n <= kGpuScratchFloats, else DGELU alone). Where
// cuBLASLt refuses the fp32 bias gradient it runs DGELU alone (bias_grad
// untouched); where it refuses that too, or aux breaks the forward's rules,
// nothing is queued. Decided once per shape (cached in h.lt), counted by
// gpu_lt_gemm_dgelu_bgrad_refused and gpu_lt_gemm_dgelu_refused.
LinearDgeluRan gpu_lt_gemm_dgelu(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m,
                                 std::size_t n, std::size_t k, BufferView a, std::size_t lda,
                                 BufferView b, std::size_t ldb, BufferView d, std::size_t ldd,
                                 BufferView aux, std::size_t ld_aux, float* bias_grad,
                                 bool accumulate_bias_grad);
std::size_t gpu_lt_gemm_dgelu_bgrad_refused(const GpuHandles& h);
std::size_t gpu_lt_gemm_dgelu_refused(const GpuHandles& h);
// An empty cache for GpuHandles::lt (cublaslt_gemm.cpp).
std::shared_ptr<LtGemmCache> make_lt_gemm_cache();

// precision bf16/fp16: y[i] = the 16-bit encoding of x[i] (exact for on-grid
// values), and back (kernels/precision.cuh).
void gpu_to_precision_bits(void* stream, std::uint16_t* y, const float* x, std::size_t n,
                           DType precision);
void gpu_from_precision_bits(void* stream, float* y, const std::uint16_t* x, std::size_t n,
                             DType precision);

void gpu_relu_forward(void* stream, const float* x, float* y, std::size_t n);
// The stored forms (kernels/stored_elementwise.h): views of the storage dtype.
void gpu_relu_forward_stored(void* stream, BufferView x, BufferView y);
void gpu_relu_backward_stored(void* stream, BufferView y, BufferView dy, BufferView dx);
void gpu_gelu_tanh_forward_stored(void* stream, BufferView x, BufferView y);
void gpu_gelu_tanh_backward_stored(void* stream, BufferView x, BufferView dy, BufferView dx);
void gpu_sum_two_stored(void* stream, BufferView y, BufferView x0, BufferView x1, float a);
void gpu_scale_stored(void* stream, BufferView y, BufferView x, float a);
// y (fp32) += x widened, x of any storage dtype.
void gpu_add_widened(void* stream, BufferView y, BufferView x);
// narrowed = sum + terms in order, rounded once (ringtrain/ops/merge.h's narrow_sum;
// checked there).
void gpu_narrow_sum(void* stream, BufferView narrowed, BufferView sum,
                    std::span<const BufferView> terms);
// Pitches and width in elements; dst and src of different storage dtypes.
void gpu_convert_blocks(void* stream, BufferView dst, std::size_t dst_pitch, BufferView src,
                        std::size_t src_pitch, std::size_t width, std::size_t rows);
void gpu_relu_backward(void* stream, const float* y, const float* dy, float* dx, std::size_t n);
void gpu_gelu_forward(void* stream, const float* x, float* y, std::size_t n);
void gpu_gelu_backward(void* stream, const float* x, const float* dy, float* dx, std::size_t n);
void gpu_gelu_tanh_forward(void* stream, const float* x, float* y, std::size_t n);
void gpu_gelu_tanh_backward(void* stream, const float* x, const float* dy, float* dx,
                            std::size_t n);
// y = x + bias (x may be y); y, dy of the storage dtype, x of it or f32.
void gpu_bias_add(void* stream, BufferView y, BufferView x, const float* bias, std::size_t outer,
                  std::size_t channels, std::size_t inner);
// Deterministic (fixed summation order, no float atomics); uses h.scratch.
void gpu_bias_grad(const GpuHandles& h, BufferView dy, float* dbias, std::size_t outer,
                   std::size_t channels, std::size_t inner, bool accumulate);
// Fused conv bias + ReLU (kernels/bias_relu.h): y = relu(x + bias) (x may be
// y); and relu's mask of dy stored into `masked` with the bias gradient of
// it, as gpu_bias_grad reduces (uses h.scratch).
void gpu_bias_relu(void* stream, BufferView y, BufferView x, const float* bias, std::size_t outer,
                   std::size_t channels, std::size_t inner);
void gpu_relu_mask_bias_grad(const GpuHandles& h, BufferView y, BufferView dy, BufferView masked,
                             float* dbias, std::size_t outer, std::size_t channels,
                             std::size_t inner, bool accumulate);
// Rows of `classes` logits `stride` apart (kernels/softmax_cross_entropy.h).
void gpu_softmax_ce_forward(void* stream, BufferView logits, const std::int32_t* labels,
                            std::size_t rows, std::size_t classes, std::size_t stride,
                            float* row_loss, std::int32_t* row_correct, float smoothing = 0.0f,
                            const std::int32_t* second = nullptr, float lam = 1.0f);
void gpu_softmax_ce_backward(void* stream, BufferView logits, const std::int32_t* labels,
                             std::size_t rows, std::size_t classes, std::size_t stride, float scale,
                             BufferView dlogits, float smoothing = 0.0f,
                             const std::int32_t* second = nullptr, float lam = 1.0f);
// Both of the above in one kernel (the fused classifier).
void gpu_softmax_ce_forward_backward(void* stream, BufferView logits, const std::int32_t* labels,
                                     std::size_t rows, std::size_t classes, std::size_t stride,
                                     float scale, BufferView dlogits, float* row_loss,
                                     std::int32_t* row_correct, float smoothing,
                                     const std::int32_t* second, float lam);
// totals[0..2] += loss sum, correct count, bad-label count of the rows.
void gpu_loss_totals_add(void* stream, const float* row_loss, const std::int32_t* row_correct,
                         std::size_t rows, double* totals);
// channels > 0: x is channels-last with hw pixels, masked as its NCHW order.
void gpu_dropout_apply(void* stream, BufferView x, BufferView y, std::uint64_t key, float p,
                       float keep_scale, std::size_t channels = 0, std::size_t hw = 0);

// Row-major GEMMs over `batch` matrices, the i-th at a + i stride_a, ... (one
// cublasSgemmStridedBatched).
void gpu_gemm_strided_batched(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m,
                              std::size_t n, std::size_t k, float alpha, const float* a,
                              std::size_t lda, std::size_t stride_a, const float* b,
                              std::size_t ldb, std::size_t stride_b, float beta, float* c,
                              std::size_t ldc, std::size_t stride_c, std::size_t batch);
// The transformer layers' kernels (kernels/transformer.h says what each does).
// y, dy of the storage dtype.
void gpu_token_embedding_forward(void* stream, const float* ids, const float* w, std::size_t rows,
                                 std::size_t vocab, std::size_t dim, BufferView y);
std::size_t gpu_token_embedding_backward_workspace_bytes(std::size_t rows, std::size_t vocab);
void gpu_token_embedding_backward(void* stream, const float* ids, BufferView dy, std::size_t rows,
                                  std::size_t vocab, std::size_t dim, float* dw, bool accumulate,
                                  void* workspace, std::size_t workspace_bytes);
void gpu_add_broadcast_rows(void* stream, const float* x, const float* w, float* y,
                            std::size_t batch, std::size_t n);
// x, y, dy of the storage dtype, dx of it or f32 (a null ptr: not wanted).
void gpu_layer_norm_forward(void* stream, BufferView x, const float* w, const float* b,
                            std::size_t rows, std::size_t c, float eps, BufferView y, float* mean,
                            float* rstd);
void gpu_layer_norm_backward(void* stream, BufferView x, const float* w, BufferView dy,
                             std::size_t rows, std::size_t c, const float* mean, const float* rstd,
                             BufferView dx);
// A LayerNorm's weight and bias gradients (kernels/layer_norm_param_grad.h),
// x and dy of the storage dtype, with the handles' scratch for the slices.
void gpu_layer_norm_param_grad(const GpuHandles& h, BufferView x, BufferView dy, std::size_t rows,
                               std::size_t c, const float* mean, const float* rstd, float* dw,
                               float* db, bool accumulate);
// Fused residual add + LayerNorm (kernels/residual_layer_norm.h): x0, x1,
// sum, y, dy of the storage dtype; d_sum, dx0, dx1 of it or f32 (dx0 and dx1
// may be null views).
void gpu_residual_layer_norm_forward(void* stream, BufferView x0, BufferView x1, float scale,
                                     const float* w, const float* b, std::size_t rows,
                                     std::size_t c, float eps, BufferView sum, BufferView y,
                                     float* mean, float* rstd);
void gpu_residual_layer_norm_backward(void* stream, BufferView sum, const float* w, BufferView dy,
                                      std::size_t rows, std::size_t c, const float* mean,
                                      const float* rstd, BufferView d_sum, bool summed, float scale,
                                      BufferView dx0, BufferView dx1);
void gpu_causal_softmax_forward(void* stream, const float* s, float* p, std::size_t matrices,
                                std::size_t t);
void gpu_causal_softmax_backward(void* stream, const float* p, const float* dp, float* ds,
                                 std::size_t matrices, std::size_t t, float scale);
// dst = 0, in stream order.
void gpu_zero(void* stream, void* dst, std::size_t bytes);
void gpu_fill_bytes(void* stream, void* dst, std::size_t bytes, unsigned char value);

// BatchNorm over [n, c, hw] (NCHW; features and NHWC: hw = 1), in the steps of
// kernels/batch_norm.h; the reductions use h.scratch for their partials.
// x, y, dy: views of the storage dtype; dx of it or f32.
void gpu_batch_norm_welford(const GpuHandles& h, BufferView x, std::size_t n, std::size_t c,
                            std::size_t hw, float* mean, float* m2, float* count_keep, float* sums);
void gpu_batch_norm_welford_ranks(void* stream, float* sums, std::size_t c, float local_count,
                                  float* mean, const float* m2, float* count_keep);
void gpu_batch_norm_finalize(void* stream, const float* m2, const float* count, std::size_t c,
                             float eps, float momentum, bool update_running, const float* mean,
                             float* invstd, float* running_mean, float* running_var);
void gpu_batch_norm_eval_stats(void* stream, const float* running_mean, const float* running_var,
                               std::size_t c, float eps, float* mean, float* invstd);
void gpu_batch_norm_apply(void* stream, BufferView x, BufferView y, std::size_t n, std::size_t c,
                          std::size_t hw, const float* mean, const float* invstd,
                          const float* gamma, const float* beta, DType precision);
void gpu_batch_norm_backward_reduce(const GpuHandles& h, BufferView x, BufferView dy, std::size_t n,
                                    std::size_t c, std::size_t hw, const float* mean,
                                    const float* invstd, float* sums, float* dgamma, float* dbeta,
                                    bool accumulate);
void gpu_batch_norm_backward_dx(void* stream, BufferView x, BufferView dy, BufferView dx,
                                std::size_t n, std::size_t c, std::size_t hw, const float* mean,
                                const float* invstd, const float* gamma, const float* sums,
                                const float* count, DType precision);
// Fused BatchNorm + (add +) ReLU (kernels/batch_norm_relu.h), after the
// statistics above; residual, dx and d_residual may be null views. The
// reduction writes d_residual (the masked dy); the dx pass then reads it. A
// null y in backward: relu's mask from x again (bn_relu_output_sign).
void gpu_batch_norm_relu_apply(void* stream, BufferView x, BufferView residual, BufferView y,
                               std::size_t n, std::size_t c, std::size_t hw, const float* mean,
                               const float* invstd, const float* gamma, const float* beta,
                               DType precision);
void gpu_batch_norm_relu_backward_reduce(const GpuHandles& h, BufferView x, BufferView y,
                                         BufferView dy, BufferView dy_addend, BufferView d_residual,
                                         std::size_t n, std::size_t c, std::size_t hw,
                                         const float* mean, const float* invstd, const float* gamma,
                                         const float* beta, float* sums, float* dgamma,
                                         float* dbeta, bool accumulate);
void gpu_batch_norm_relu_backward_dx(void* stream, BufferView x, BufferView y, BufferView dy,
                                     BufferView dy_addend, BufferView dx, BufferView d_residual,
                                     std::size_t n, std::size_t c, std::size_t hw,
                                     const float* mean, const float* invstd, const float* gamma,
                                     const float* beta, const float* sums, const float* count,
                                     DType precision);
// Global average pool over [N, C, HW] (NCHW) or [N, HW, C] (nhwc): x, y, dy of
// the storage dtype, dx of it or f32.
void gpu_global_avg_pool_forward(void* stream, BufferView x, BufferView y, std::size_t batch,
                                 std::size_t channels, std::size_t hw, bool nhwc);
void gpu_global_avg_pool_backward(void* stream, BufferView dy, BufferView dx, std::size_t batch,
                                  std::size_t channels, std::size_t hw, bool nhwc);
// The batched transpose of the layout ops, x and y of storage dtypes each.
void gpu_transpose_batched(void* stream, BufferView x, BufferView y, std::size_t batch,
                           std::size_t rows, std::size_t cols);
// The fp32 form (a filter's copy); the launch reads no view's device.
inline void gpu_transpose_batched(void* stream, const float* x, float* y, std::size_t batch,
                                  std::size_t rows, std::size_t cols) {
  const std::size_t n = batch * rows * cols;
  gpu_transpose_batched(stream, BufferView{const_cast<float*>(x), n, DType::f32, Device::cuda(0)},
                        BufferView{y, n, DType::f32, Device::cuda(0)}, batch, rows, cols);
}
// y += a x; x *= f.
void gpu_axpy(void* stream, float a, const float* x, float* y, std::size_t n);
// out = a x + y on the grid of precision (kernels/precision.cuh codes).
void gpu_axpy_rounded(void* stream, float a, const float* x, const float* y, float* out,
                      std::size_t n, DType precision);
void gpu_scale(void* stream, float* x, std::size_t n, float f);
// y = x rounded to the grid of precision (kernels/precision.cuh); y may be x.
void gpu_round_to_precision(void* stream, float* y, const float* x, std::size_t n, DType precision);
// rows blocks of width bytes, from src every spitch bytes to dst every dpitch bytes.
// device_buffers: both are device memory (a kernel may copy them; else
// either may be a host array, and the runtime's copy runs).
void gpu_copy_blocks(void* stream, void* dst, std::size_t dpitch, const void* src,
                     std::size_t spitch, std::size_t width, std::size_t rows,
                     bool device_buffers = false);

// Per batch size: descriptors and the three algorithms, measured once with
// cuDNN's Find (gpu_conv_plan.cpp); one workspace; the hot loop neither
// queries cuDNN nor allocates.
class GpuConvPlan {
 public:
  virtual ~GpuConvPlan() = default;
  virtual void forward(const float* x, const float* w, float* y, std::size_t batch) = 0;
  virtual void backward_filter(const float* x, const float* dy, float* dw, std::size_t batch,
                               bool accumulate) = 0;
  virtual void backward_data(const float* w, const float* dy, float* dx, std::size_t batch) = 0;
  // The stored forms, under bf16/fp16 where cuDNN has 16-bit forward and
  // backward-data algorithms for the shape (stores_16bit): x, y and dy are
  // 16-bit tensors that cuDNN reads and writes directly, dx 16-bit or f32;
  // the weight gradient widens x and dy into the context's fp32 scratch.
  virtual bool stores_16bit() const = 0;
  virtual void forward_stored(BufferView x, const float* w, BufferView y, std::size_t batch) = 0;
  virtual void backward_filter_stored(BufferView x, BufferView dy, float* dw, std::size_t batch,
                                      bool accumulate) = 0;
  virtual void backward_data_stored(const float* w, BufferView dy, BufferView dx,
                                    std::size_t batch) = 0;
  // The algorithms chosen so far, per batch size, as one line: operation,
  // cuDNN algorithm, math type and workspace bytes, with the 16-bit ones that
  // run under --precision bf16|fp16 (bench step --layers shows it).
  virtual std::string describe() const = 0;
};
std::unique_ptr<GpuConvPlan> make_gpu_conv_plan(const GpuHandles& h, const Conv2dGeometry& g,
                                                std::size_t max_batch);

// Max and average pooling (kernels/pool2d.cu): max writes each output's
// argmax, laid out as y, which its backward reads; dx is overwritten.
void gpu_pool2d_forward(void* stream, const kernels::PoolShape& shape, std::size_t channels,
                        bool max, bool nhwc, BufferView x, BufferView y, std::int32_t* argmax,
                        std::size_t batch);
void gpu_pool2d_backward(void* stream, const kernels::PoolShape& shape, std::size_t channels,
                         bool max, bool nhwc, BufferView dy, const std::int32_t* argmax,
                         BufferView dx, std::size_t batch);

// The handles of a GPU context, for the calls above.
inline const GpuHandles& handles_of(const ComputeContext& ctx) {
  return *ctx.gpu_handles();
}

}  // namespace ringtrain::detail
