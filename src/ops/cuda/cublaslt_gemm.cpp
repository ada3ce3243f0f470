// The stored products through cuBLASLt: 16-bit A and B on tensor cores with
// fp32 accumulation (CUBLAS_COMPUTE_32F), D written in the context's 16-bit
// dtype (or fp32) by the GEMM itself, with the bias added in its epilogue
// before that one rounding, or the bias gradient reduced in the epilogue of
// the weight-gradient product. This replaces a round trip through an fp32
// scratch (4 bytes written and read per element, then 2 written) by the 2
// bytes the GEMM stores. The GELU epilogue (GELU_AUX_BIAS) also applies
// gelu to the fp32 sum plus bias and stores both: D = gelu, and the
// pre-activation as its auxiliary output (the linear + gelu_tanh fusion).
// The backward's DGELU_BGRAD epilogue (or DGELU alone) multiplies the fp32
// product dy W by gelu_tanh' of that stored pre-activation, read back as its
// auxiliary input, stores the result once rounded, and reduces its column
// sums into the bias gradient of the linear before the gelu.
//
// Each shape's descriptors and algorithm are made once, from
// cublasLtMatmulAlgoGetHeuristic with the shared workspace, and cached with
// the context's handles (LtGemmCache), so a steady step makes no heuristic
// query and allocates nothing. The context's ops run in its stream's order,
// so they share the one workspace, as its convolutions share theirs.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "core/cuda/check_cublas.h"
#include "core/cuda/check_cuda.h"
#include "core/stream_graph.h"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"
#include "tensor/cuda_memory.h"

namespace ringtrain::detail {

namespace {

// cuBLAS's recommendation for Hopper (smaller GPUs use less of it).
constexpr std::size_t kLtWorkspaceBytes = std::size_t{32} << 20;

enum class LtEpilogue : int { none, bias, bias_grad, gelu_aux_bias, dgelu, dgelu_bgrad };

// The largest power of two (up to 256) that divides the address: the
// algorithm must accept buffers aligned only that much (cuBLASLt assumes 256
// unless told), and the cache keys on it.
std::uint32_t alignment_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  std::uint32_t align = 256;
  while (align > 1 && a % align != 0) align /= 2;
  return align;
}

const char* epilogue_name(LtEpilogue e) {
  return e == LtEpilogue::bias            ? "bias"
         : e == LtEpilogue::bias_grad     ? "bias gradient (BGRADB)"
         : e == LtEpilogue::gelu_aux_bias ? "GELU_AUX_BIAS"
         : e == LtEpilogue::dgelu         ? "DGELU"
         : e == LtEpilogue::dgelu_bgrad   ? "DGELU_BGRAD"
                                          : "none";
}

struct LtKey {
  bool trans_a, trans_b;
  std::size_t m, n, k, lda, ldb, ldd;
  DType d_type;
  bool beta_zero;
  LtEpilogue epilogue;
  std::uint32_t align_a = 0, align_b = 0, align_d = 0;
  // The GELU epilogues' auxiliary (GELU_AUX_BIAS's output, DGELU's input):
  // its leading dimension and alignment (0 for the other epilogues).
  std::size_t ld_aux = 0;
  std::uint32_t align_aux = 0;
  // The bias (or bias gradient) vector's alignment: the heuristic reads it
  // from the pointer (0 without one).
  std::uint32_t align_vec = 0;
  // -1: the heuristic's first at the operands' own alignments; r >= 0: the
  // r-th of its first kLtMostRanked, asked at alignments of at most 16
  // bytes (a choice timed on other buffers than the ones it runs on: the
  // ranking then depends on the shape alone).
  int rank = -1;
  auto tie() const {
    return std::tie(trans_a, trans_b, m, n, k, lda, ldb, ldd, d_type, beta_zero, epilogue, align_a,
                    align_b, align_d, ld_aux, align_aux, align_vec, rank);
  }
  bool operator<(const LtKey& o) const { return tie() < o.tie(); }
};

// The key of a product: its shape, D's dtype, whether beta is 0, the
// epilogue, the operands' alignments, and the bias (gradient) vector's
// alignment (vec null: none).
LtKey product_key(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                  BufferView a, std::size_t lda, BufferView b, std::size_t ldb, BufferView d,
                  std::size_t ldd, bool beta_zero, LtEpilogue epilogue, const void* vec) {
  LtKey key{trans_a, trans_b, m, n, k, lda, ldb, ldd, d.dtype, beta_zero, epilogue};
  key.align_a = alignment_of(a.ptr);
  key.align_b = alignment_of(b.ptr);
  key.align_d = alignment_of(d.ptr);
  key.align_vec = vec != nullptr ? alignment_of(vec) : 0;
  return key;
}

// The key of a product with a GELU epilogue (GELU_AUX_BIAS, DGELU[_BGRAD]):
// a 16-bit D written with beta 0, and the auxiliary's leading dimension and
// alignment.
LtKey aux_epilogue_key(bool trans_a, bool trans_b, std::size_t m, std::size_t n, std::size_t k,
                       BufferView a, std::size_t lda, BufferView b, std::size_t ldb, BufferView d,
                       std::size_t ldd, LtEpilogue epilogue, BufferView aux, std::size_t ld_aux,
                       const void* vec) {
  LtKey key = product_key(trans_a, trans_b, m, n, k, a, lda, b, ldb, d, ldd, true, epilogue, vec);
  key.ld_aux = ld_aux;
  key.align_aux = alignment_of(aux.ptr);
  return key;
}

// A key's product shape, whatever its bias (gradient) vector's alignment:
// what the refusal counters count.
LtKey refused_shape(LtKey key) {
  key.align_vec = 0;
  return key;
}

// One shape's descriptors and chosen algorithm, owned.
struct LtPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  // cuBLASLt refused the fp32 bias with a 16-bit D (its header documents a
  // bias of D's type, with exceptions that do not name this case; no GPU has
  // answered yet): the GEMM writes fp32 into the cache's staging buffer and
  // gpu_bias_add adds the bias and rounds once into D, the same numbers
  // through the round trip this file otherwise saves.
  bool bias_apart = false;
  // cuBLASLt refused the bias-gradient epilogue (BGRADB) for this shape: the
  // product runs without it and the caller reduces the bias gradient itself.
  bool sums_apart = false;
  // A cublasLtMatmul with it has succeeded (an epilogue plan whose first
  // call cublasLtMatmul itself refuses is dropped: refused_on_first_call).
  bool proven = false;
  LtPlan() = default;
  LtPlan(const LtPlan&) = delete;
  LtPlan& operator=(const LtPlan&) = delete;
  ~LtPlan() {
    if (d != nullptr) (void)cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) (void)cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) (void)cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) (void)cublasLtMatmulDescDestroy(desc);
  }
};

cudaDataType_t cuda_type(DType t) {
  return t == DType::f16 ? CUDA_R_16F : t == DType::bf16 ? CUDA_R_16BF : CUDA_R_32F;
}

}  // namespace

// The context's cuBLASLt handle, workspace and plans, made on first use (a
// context that never runs a stored product holds none of them).
struct LtGemmCache {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  std::map<LtKey, std::unique_ptr<LtPlan>> plans;
  // The bias_apart plans' fp32 output, grown to the largest (first use of a
  // shape only), and how many shapes took that path.
  float* staging = nullptr;
  std::size_t staging_floats = 0;
  std::size_t bias_apart_shapes = 0;
  // Shapes whose bias-gradient epilogue cuBLASLt refused (sums_apart plans).
  std::size_t sums_apart_shapes = 0;
  // Product shapes (refused_shape: the key without the vector's alignment,
  // so that one shape with its bias at two alignments counts once) whose
  // GELU epilogue cuBLASLt refused, or whose auxiliary broke its documented
  // layout rules.
  std::set<LtKey> gelu_refused;
  // The backward's: shapes whose DGELU_BGRAD cuBLASLt refused while DGELU
  // alone ran (the bias gradient then reduced by the linear's own backward),
  // and shapes where both were refused (the unfused pair ran).
  std::set<LtKey> dgelu_bgrad_refused;
  std::set<LtKey> dgelu_refused;
  LtGemmCache() = default;
  LtGemmCache(const LtGemmCache&) = delete;
  LtGemmCache& operator=(const LtGemmCache&) = delete;
  ~LtGemmCache() {
    plans.clear();
    if (staging != nullptr) cuda_free(staging, 0);
    if (workspace != nullptr) cuda_free(workspace, 0);
    if (handle != nullptr) (void)cublasLtDestroy(handle);
  }
};

std::shared_ptr<LtGemmCache> make_lt_gemm_cache() {
  return std::make_shared<LtGemmCache>();
}

std::size_t gpu_lt_gemm_bias_apart(const GpuHandles& h) {
  return h.lt != nullptr ? h.lt->bias_apart_shapes : 0;
}

std::size_t gpu_lt_gemm_sums_apart(const GpuHandles& h) {
  return h.lt != nullptr ? h.lt->sums_apart_shapes : 0;
}

std::size_t gpu_lt_gemm_gelu_refused(const GpuHandles& h) {
  return h.lt != nullptr ? h.lt->gelu_refused.size() : 0;
}

std::size_t gpu_lt_gemm_dgelu_bgrad_refused(const GpuHandles& h) {
  return h.lt != nullptr ? h.lt->dgelu_bgrad_refused.size() : 0;
}

std::size_t gpu_lt_gemm_dgelu_refused(const GpuHandles& h) {
  return h.lt != nullptr ? h.lt->dgelu_refused.size() : 0;
}

namespace {

void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr, const void* value,
              std::size_t bytes) {
  RT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attr, value, bytes));
}

// Row-major D[m, n] = op(A) op(B) is column-major D^T[n, m] = op(B)^T op(A)^T
// (as gpu_gemm): cuBLASLt's A is our B and its B is our A, each stored
// matrix's row-major [r, c] read as column-major [c, r] with the same leading
// dimension, and the transpose flags kept. Null where the heuristic has no
// algorithm for it.
std::unique_ptr<LtPlan> try_plan(LtGemmCache& cache, const LtKey& key, DType ab_type,
                                 LtEpilogue epi, DType d_type, std::size_t ldd,
                                 std::uint32_t align_d, void* aux = nullptr,
                                 const void* vec = nullptr) {
  auto plan = std::make_unique<LtPlan>();
  RT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t op_a = key.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's A: our B
  const cublasOperation_t op_b = key.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;  // cuBLASLt's B: our A
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a));
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b));
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  // The bias of a forward: D^T has n rows (our n output features), and
  // EPILOGUE_BIAS adds a vector of D's row count to every column, i.e. b[j]
  // to every row of our row-major D.
  if (epi == LtEpilogue::bias) epilogue = CUBLASLT_EPILOGUE_BIAS;
  // The bias gradient of dW = dyᵀ x (our trans_a product, m = out): db[i] is
  // the sum over k of op(A)[i, k], our A being dy. After the swap, our A is
  // cuBLASLt's B, and BGRADB reduces op(B) over k into a vector of D^T's
  // column count, which is our m: the sums we want. (BGRADA would reduce
  // cuBLASLt's A, our x.) This is the NT layout cuBLASLt's bias-gradient
  // epilogues are made for: cuBLASLt's A (x) not transposed, B (dy) transposed.
  if (epi == LtEpilogue::bias_grad) epilogue = CUBLASLT_EPILOGUE_BGRADB;
  // The bias as for EPILOGUE_BIAS, then gelu (cuBLASLt's is the tanh form,
  // GPT-2's: docs/precision.md) of the fp32 sum into D, and that sum (the
  // pre-activation) into the auxiliary matrix: D^T's shape [n, m], column-
  // major with leading dimension ld_aux, i.e. our row-major [m, n] with
  // ld_aux per row; in D's dtype, each rounded once.
  if (epi == LtEpilogue::gelu_aux_bias) {
    epilogue = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
    const auto ld_aux = static_cast<std::int64_t>(key.ld_aux);
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof(ld_aux));
    // Its dtype is left unset: the header makes it D's by default (the
    // exceptions are fp8's), and an explicit one that cuBLASLt does not take
    // fails only in cublasLtMatmul, past the heuristic's refusal we fall back on.
    // The heuristic reads the pointer's alignment from it (the header says
    // so): the call's own, which the cache keys on (align_aux).
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
  }
  // The backward of that pair, on dx = dy W of the linear after the gelu:
  // D = gelu_tanh'(aux) times the fp32 product, rounded once into D's dtype,
  // aux (the stored pre-activation, an input here) laid out as D, as in the
  // forward. DGELU_BGRAD also writes the bias gradient of the linear before
  // the gelu: cublasLt.h makes the vector as long as D^T's rows (our n), and
  // it is the reduction of the gelu gradient (the epilogue's output, not the
  // product: apex's and Transformer Engine's fused MLPs read it as the first
  // linear's bias gradient) over D^T's columns, our rows.
  if (epi == LtEpilogue::dgelu || epi == LtEpilogue::dgelu_bgrad) {
    epilogue = epi == LtEpilogue::dgelu ? CUBLASLT_EPILOGUE_DGELU : CUBLASLT_EPILOGUE_DGELU_BGRAD;
    const auto ld_aux = static_cast<std::int64_t>(key.ld_aux);
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld_aux, sizeof(ld_aux));
    // Its dtype is D's by default, the stored pre-activation's (as forward).
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux));
  }
  set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue));
  if (epi != LtEpilogue::none && epi != LtEpilogue::dgelu) {
    // An fp32 bias (the layer's own parameter, or its fp32 gradient): fp32 sum
    // plus fp32 bias, rounded once into the 16-bit D, as the unfused path.
    // DGELU_BGRAD's bias gradient is D's type unless set (cublasLt.h): fp32
    // here too, or the heuristic refuses and the caller runs DGELU alone.
    const std::int32_t bias_type = CUDA_R_32F;
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof(bias_type));
    // The heuristic takes the vector's alignment from its pointer (cublasLt.h,
    // BIAS_POINTER): null would claim the largest. The call's own, which the
    // cache keys on (align_vec); each call sets its pointer again.
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof(vec));
  }
  const auto layout = [](cublasLtMatrixLayout_t* l, DType t, std::size_t rows, std::size_t cols,
                         std::size_t ld) {
    RT_CUBLAS_CHECK(
        cublasLtMatrixLayoutCreate(l, cuda_type(t), rows, cols, static_cast<std::int64_t>(ld)));
  };
  // cuBLASLt's A (our B) as stored, column-major: op(A) is [n, k].
  layout(&plan->a, ab_type, key.trans_b ? key.k : key.n, key.trans_b ? key.n : key.k, key.ldb);
  // cuBLASLt's B (our A): op(B) is [k, m].
  layout(&plan->b, ab_type, key.trans_a ? key.m : key.k, key.trans_a ? key.k : key.m, key.lda);
  layout(&plan->d, d_type, key.n, key.m, ldd);

  // Ranked: the heuristic's first kLtMostRanked results (the same question
  // for every rank, so the ranks index one list), of which the key's is
  // taken, none where it ranks fewer; else its first.
  RT_CHECK(key.rank >= -1 && key.rank < kLtMostRanked,
           "a cuBLASLt algorithm rank of {} (the heuristic's first {} are asked)", key.rank,
           kLtMostRanked);
  const int asked = key.rank < 0 ? 1 : kLtMostRanked, taken = key.rank < 0 ? 0 : key.rank;
  cublasLtMatmulHeuristicResult_t ranked[kLtMostRanked]{};
  cublasLtMatmulPreference_t pref = nullptr;
  RT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  int found = 0;
  try {
    const std::uint64_t ws = kLtWorkspaceBytes;
    RT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    // Our A is cuBLASLt's B and vice versa; C is D.
    const std::uint32_t aligns[4] = {key.align_b, key.align_a, align_d, align_d};
    const cublasLtMatmulPreferenceAttributes_t attrs[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      RT_CUBLAS_CHECK(
          cublasLtMatmulPreferenceSetAttribute(pref, attrs[i], &aligns[i], sizeof(aligns[i])));
    // A split-K algorithm may reduce its partial sums in D's type (the
    // INPLACE and OUTPUT_TYPE schemes): for a 16-bit D that rounds each
    // partial sum, where the stored products promise one rounding of the
    // fp32 sum. Only unsplit algorithms and fp32 reductions, then.
    if (d_type != DType::f32) {
      const std::uint32_t schemes =
          CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      RT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
          pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof(schemes)));
    }
    // NOT_SUPPORTED is how cuBLASLt answers "no algorithm for this
    // configuration" (cublasLt.h): a refusal the callers fall back from, not
    // an error. With an epilogue, INVALID_VALUE is one too: its fp32 vector
    // beside a 16-bit D is a combination cublasLt.h does not list, which a
    // library may reject as an invalid value rather than an unsupported one.
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        cache.handle, plan->desc, plan->a, plan->b, plan->d, plan->d, pref, asked, ranked, &found);
    if (st == CUBLAS_STATUS_NOT_SUPPORTED ||
        (st == CUBLAS_STATUS_INVALID_VALUE && epi != LtEpilogue::none))
      found = 0;
    else
      RT_CUBLAS_CHECK(st);
  } catch (...) {
    (void)cublasLtMatmulPreferenceDestroy(pref);
    throw;
  }
  (void)cublasLtMatmulPreferenceDestroy(pref);
  if (found <= taken || ranked[taken].state != CUBLAS_STATUS_SUCCESS) return nullptr;
  plan->algo = ranked[taken].algo;
  return plan;
}

// The plan of a product, with its epilogue where cuBLASLt takes it, else the
// fallback without it (epilogue_refused: cublasLtMatmul itself refused the
// epilogue's plan on its first call).
std::unique_ptr<LtPlan> make_plan(LtGemmCache& cache, const LtKey& key, DType ab_type,
                                  const void* vec, bool epilogue_refused = false) {
  std::unique_ptr<LtPlan> plan;
  if (!epilogue_refused)
    plan =
        try_plan(cache, key, ab_type, key.epilogue, key.d_type, key.ldd, key.align_d, nullptr, vec);
  // The fp32 bias refused with a 16-bit D: the product into the fp32 staging
  // buffer (contiguous, freshly allocated: 256-byte aligned), the bias apart.
  const bool apart = plan == nullptr && key.epilogue == LtEpilogue::bias &&
                     key.d_type != DType::f32 && key.beta_zero && key.ldd == key.n;
  if (apart) {
    plan = try_plan(cache, key, ab_type, LtEpilogue::none, DType::f32, key.n, 256);
    if (plan != nullptr) {
      plan->bias_apart = true;
      ++cache.bias_apart_shapes;
    }
  }
  // The bias-gradient epilogue refused: the product alone, the sums apart.
  const bool sums_apart = plan == nullptr && key.epilogue == LtEpilogue::bias_grad;
  if (sums_apart) {
    plan = try_plan(cache, key, ab_type, LtEpilogue::none, key.d_type, key.ldd, key.align_d);
    if (plan != nullptr) {
      plan->sums_apart = true;
      ++cache.sums_apart_shapes;
    }
  }
  RT_CHECK(
      plan != nullptr,
      "cuBLASLt has no algorithm for the stored product {} x {} x {} (row-major, A{} lda {}, "
      "B{} ldb {}; {} operands, {} output, ldd {}, beta {}, epilogue {}; alignment A {}, B {}, "
      "D {} bytes{})",
      key.m, key.n, key.k, key.trans_a ? "ᵀ" : "", key.lda, key.trans_b ? "ᵀ" : "", key.ldb,
      dtype_name(ab_type), dtype_name(key.d_type), key.ldd, key.beta_zero ? "0" : "1",
      epilogue_name(key.epilogue), key.align_a, key.align_b, key.align_d,
      apart              ? "; nor without the epilogue into fp32"
      : sums_apart       ? "; nor without the epilogue"
      : epilogue_refused ? "; cublasLtMatmul refused the epilogue's plan on its first call"
      : key.rank >= 0 ? fmt::format("; its heuristic ranks fewer than {} algorithms", key.rank + 1)
                      : std::string());
  return plan;
}

}  // namespace

namespace {

// One product through a plan: cuBLASLt's A is our B and its B our A (as
// try_plan lays them out), C is D.
cublasStatus_t run_plan(const LtGemmCache& cache, const LtPlan& plan, const void* our_a,
                        const void* our_b, float beta, void* d, cudaStream_t stream) {
  const float alpha = 1.0f;
  return cublasLtMatmul(cache.handle, plan.desc, &alpha, our_b, plan.a, our_a, plan.b, &beta, d,
                        plan.d, d, plan.d, &plan.algo, cache.workspace, kLtWorkspaceBytes, stream);
}

// cublasLt.h says a data type set for a combination it does not support
// fails in cublasLtMatmul (INVALID_VALUE), past the heuristic. So an epilogue
// plan's first call that fails so (or NOT_SUPPORTED), before anything is
// queued, is a refusal, as the heuristic's: true, and the caller drops the
// plan for its fallback. Any other failure, or one of a plan that has run
// before, is an Error.
bool refused_on_first_call(LtPlan& plan, cublasStatus_t st) {
  if (st == CUBLAS_STATUS_SUCCESS) {
    plan.proven = true;
    return false;
  }
  if (!plan.proven && (st == CUBLAS_STATUS_INVALID_VALUE || st == CUBLAS_STATUS_NOT_SUPPORTED))
    return true;
  RT_CUBLAS_CHECK(st);
  return false;
}

// The context's cuBLASLt cache, its handle and workspace made on first use.
LtGemmCache& lt_cache(const GpuHandles& h) {
  RT_CHECK(h.lt != nullptr, "the context has no cuBLASLt cache");
  LtGemmCache& cache = *h.lt;
  if (cache.handle == nullptr) {
    RT_CUBLAS_CHECK(cublasLtCreate(&cache.handle));
    cache.workspace = cuda_allocate_here(kLtWorkspaceBytes);
  }
  return cache;
}

// A bias gradient the epilogue wrote into the context's reduction scratch
// (the epilogue only overwrites, and wants 16-byte alignment): added to the
// caller's vector (gradient accumulation) or copied there, in stream order.
void finish_staged_sums(const GpuHandles& h, float* sums, std::size_t n, bool accumulate) {
  if (accumulate)
    gpu_axpy(h.stream, 1.0f, h.scratch, sums, n);
  else
    RT_CUDA_CHECK(cudaMemcpyAsync(sums, h.scratch, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                  static_cast<cudaStream_t>(h.stream)));
}

bool aligned16(const void* ptr) {
  return reinterpret_cast<std::uintptr_t>(ptr) % 16 == 0;
}

// The bias vectors live in the flat parameter and gradient buffers, at any
// float offset; cuBLASLt's epilogues want them 16-byte aligned. A misaligned
// bias is copied to the context's reduction scratch (n floats), in stream
// order, and read there.
const float* aligned_bias(const GpuHandles& h, const float* bias, std::size_t n) {
  if (bias == nullptr || aligned16(bias)) return bias;
  RT_CHECK(n <= kGpuScratchFloats, "a misaligned bias of {} values exceeds the scratch of {}", n,
           kGpuScratchFloats);
  RT_CUDA_CHECK(cudaMemcpyAsync(h.scratch, bias, n * sizeof(float), cudaMemcpyDeviceToDevice,
                                static_cast<cudaStream_t>(h.stream)));
  return h.scratch;
}

}  // namespace

bool gpu_lt_gemm(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m, std::size_t n,
                 std::size_t k, BufferView a, std::size_t lda, BufferView b, std::size_t ldb,
                 float beta, BufferView d, std::size_t ldd, const float* bias, float* a_sums,
                 bool accumulate_sums, int algo_rank) {
  if (m == 0 || n == 0) return true;
  const DType p = h.precision;
  RT_CHECK(p != DType::f32 && a.dtype == p && b.dtype == p,
           "a cuBLASLt stored product of {} and {} on a {} context", dtype_name(a.dtype),
           dtype_name(b.dtype), dtype_name(p));
  RT_CHECK(d.dtype == p || d.dtype == DType::f32,
           "a cuBLASLt stored product into a {} output on a {} context", dtype_name(d.dtype),
           dtype_name(p));
  RT_CHECK(k > 0, "a cuBLASLt stored product {} x {} with k = 0", m, n);
  RT_CHECK(bias == nullptr || a_sums == nullptr,
           "a cuBLASLt product takes a bias or a bias gradient, not both");
  LtGemmCache& cache = lt_cache(h);
  auto stream = static_cast<cudaStream_t>(h.stream);

  // A bias gradient that is misaligned, or is to be added to (gradient
  // accumulation: the epilogue only overwrites), is written to the context's
  // reduction scratch and then copied or added (m floats). The caller keeps
  // such vectors within kGpuScratchFloats (it reduces a longer one itself).
  const float* bias_in = aligned_bias(h, bias, n);
  const bool staged_sums = a_sums != nullptr && (accumulate_sums || !aligned16(a_sums));
  if (staged_sums)
    RT_CHECK(m <= kGpuScratchFloats,
             "a bias gradient of {} values to stage exceeds the scratch of {} (the caller reduces "
             "it itself)",
             m, kGpuScratchFloats);
  float* sums_out = staged_sums ? h.scratch : a_sums;
  const void* vec = bias != nullptr     ? static_cast<const void*>(bias_in)
                    : a_sums != nullptr ? static_cast<const void*>(sums_out)
                                        : nullptr;

  LtKey key = product_key(trans_a, trans_b, m, n, k, a, lda, b, ldb, d, ldd, beta == 0.0f,
                          bias != nullptr     ? LtEpilogue::bias
                          : a_sums != nullptr ? LtEpilogue::bias_grad
                                              : LtEpilogue::none,
                          vec);
  key.rank = algo_rank;
  if (algo_rank >= 0)
    for (std::uint32_t* align : {&key.align_a, &key.align_b, &key.align_d})
      *align = std::min<std::uint32_t>(*align, 16);
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) it = cache.plans.emplace(key, make_plan(cache, key, p, vec)).first;
  // The epilogue as planned; its plan's first call refused: remade without it.
  if (key.epilogue != LtEpilogue::none && !it->second->bias_apart && !it->second->sums_apart) {
    LtPlan& plan = *it->second;
    set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof(vec));
    if (!refused_on_first_call(plan, run_plan(cache, plan, a.ptr, b.ptr, beta, d.ptr, stream))) {
      if (staged_sums) finish_staged_sums(h, a_sums, m, accumulate_sums);
      return true;
    }
    it->second = make_plan(cache, key, p, vec, true);
  }
  LtPlan& plan = *it->second;
  if (plan.bias_apart) {
    const std::size_t need = m * n;
    if (cache.staging_floats < need) {
      if (cache.staging != nullptr) cuda_free(cache.staging, 0);
      cache.staging = nullptr;
      cache.staging_floats = 0;
      cache.staging = static_cast<float*>(cuda_allocate_here(need * sizeof(float)));
      cache.staging_floats = need;
      note_graph_buffers_moved();  // a captured graph may hold the old one
    }
    RT_CUBLAS_CHECK(run_plan(cache, plan, a.ptr, b.ptr, 0.0f, cache.staging, stream));
    gpu_bias_add(h.stream, d, BufferView{cache.staging, need, DType::f32, d.device}, bias, m, n, 1);
    return true;
  }
  // The bias-gradient epilogue refused: the product alone, the sums left to
  // the caller. Else a product without an epilogue.
  RT_CUBLAS_CHECK(run_plan(cache, plan, a.ptr, b.ptr, beta, d.ptr, stream));
  return !plan.sums_apart;
}

bool gpu_lt_gemm_gelu_aux_bias(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m,
                               std::size_t n, std::size_t k, BufferView a, std::size_t lda,
                               BufferView b, std::size_t ldb, BufferView d, std::size_t ldd,
                               const float* bias, BufferView aux, std::size_t ld_aux) {
  if (m == 0 || n == 0) return true;
  const DType p = h.precision;
  RT_CHECK(p != DType::f32 && a.dtype == p && b.dtype == p && d.dtype == p && aux.dtype == p,
           "a cuBLASLt GELU epilogue on {} and {} into {} (auxiliary {}) on a {} context: all "
           "must be the context's 16-bit dtype",
           dtype_name(a.dtype), dtype_name(b.dtype), dtype_name(d.dtype), dtype_name(aux.dtype),
           dtype_name(p));
  RT_CHECK(k > 0 && bias != nullptr,
           "a cuBLASLt GELU epilogue {} x {} needs k > 0 (got {}) and a bias", m, n, k);
  LtGemmCache& cache = lt_cache(h);
  const void* bias_in = aligned_bias(h, bias, n);
  const LtKey key = aux_epilogue_key(trans_a, trans_b, m, n, k, a, lda, b, ldb, d, ldd,
                                     LtEpilogue::gelu_aux_bias, aux, ld_aux, bias_in);
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) {
    // cuBLASLt's documented rules for the GELU auxiliary: a leading dimension
    // divisible by 8 and no less than D^T's rows (our n); a pointer aligned
    // for 16-byte vector stores (as every cuBLASLt pointer, llm.c checks).
    // Outside them, or where the heuristic has no algorithm, the plan is null:
    // the caller runs the unfused pair, and the shape counts once.
    std::unique_ptr<LtPlan> plan;
    if (ld_aux % 8 == 0 && ld_aux >= n && key.align_aux >= 16)
      plan =
          try_plan(cache, key, p, key.epilogue, key.d_type, key.ldd, key.align_d, aux.ptr, bias_in);
    if (plan == nullptr) cache.gelu_refused.insert(refused_shape(key));
    it = cache.plans.emplace(key, std::move(plan)).first;
  }
  if (it->second == nullptr) return false;
  LtPlan& plan = *it->second;
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_in, sizeof(bias_in));
  void* aux_out = aux.ptr;
  set_desc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_out, sizeof(aux_out));
  if (refused_on_first_call(plan, run_plan(cache, plan, a.ptr, b.ptr, 0.0f, d.ptr,
                                           static_cast<cudaStream_t>(h.stream)))) {
    it->second.reset();  // the caller runs the unfused pair, now and after
    cache.gelu_refused.insert(refused_shape(key));
    return false;
  }
  return true;
}

LinearDgeluRan gpu_lt_gemm_dgelu(const GpuHandles& h, bool trans_a, bool trans_b, std::size_t m,
                                 std::size_t n, std::size_t k, BufferView a, std::size_t lda,
                                 BufferView b, std::size_t ldb, BufferView d, std::size_t ldd,
                                 BufferView aux, std::size_t ld_aux, float* bias_grad,
                                 bool accumulate_bias_grad) {
  const DType p = h.precision;
  RT_CHECK(p != DType::f32 && a.dtype == p && b.dtype == p && d.dtype == p && aux.dtype == p,
           "a cuBLASLt DGELU epilogue on {} and {} into {} (auxiliary {}) on a {} context: all "
           "must be the context's 16-bit dtype",
           dtype_name(a.dtype), dtype_name(b.dtype), dtype_name(d.dtype), dtype_name(aux.dtype),
           dtype_name(p));
  RT_CHECK(m > 0 && n > 0 && k > 0, "a cuBLASLt DGELU epilogue {} x {} x {}: empty", m, n, k);
  LtGemmCache& cache = lt_cache(h);
  auto stream = static_cast<cudaStream_t>(h.stream);
  // The plan of one epilogue, made and cached on first use (null where the
  // auxiliary breaks cublasLt.h's rules, as in the forward, or the heuristic
  // has no algorithm).
  const auto plan_for = [&](LtEpilogue epi, const void* vec) -> std::unique_ptr<LtPlan>& {
    const LtKey key =
        aux_epilogue_key(trans_a, trans_b, m, n, k, a, lda, b, ldb, d, ldd, epi, aux, ld_aux, vec);
    auto it = cache.plans.find(key);
    if (it == cache.plans.end()) {
      std::unique_ptr<LtPlan> plan;
      if (ld_aux % 8 == 0 && ld_aux >= n && key.align_aux >= 16)
        plan = try_plan(cache, key, p, epi, d.dtype, ldd, key.align_d, aux.ptr, vec);
      it = cache.plans.emplace(key, std::move(plan)).first;
    }
    return it->second;
  };
  // One GEMM with a plan; a refusal on its first call drops the plan.
  const void* aux_in = aux.ptr;
  const auto run = [&](std::unique_ptr<LtPlan>& plan, float* sums) {
    set_desc(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux_in, sizeof(aux_in));
    if (sums != nullptr)
      set_desc(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &sums, sizeof(sums));
    if (refused_on_first_call(*plan, run_plan(cache, *plan, a.ptr, b.ptr, 0.0f, d.ptr, stream))) {
      plan.reset();
      return false;
    }
    return true;
  };
  // The bias gradient, as gpu_lt_gemm's: the epilogue overwrites, so an
  // accumulated (or misaligned) one goes through the context's reduction
  // scratch and is added (or copied) after; one too wide for it is left to
  // the caller (DGELU alone).
  const bool staged = bias_grad != nullptr && (accumulate_bias_grad || !aligned16(bias_grad));
  float* sums_out = bias_grad == nullptr || (staged && n > kGpuScratchFloats) ? nullptr
                    : staged                                                  ? h.scratch
                                                                              : bias_grad;
  if (sums_out != nullptr) {
    std::unique_ptr<LtPlan>& plan = plan_for(LtEpilogue::dgelu_bgrad, sums_out);
    if (plan != nullptr) {
      if (run(plan, sums_out)) {
        if (staged) finish_staged_sums(h, bias_grad, n, accumulate_bias_grad);
        return LinearDgeluRan::dgelu_bgrad;
      }
    }
  }
  // DGELU alone: the caller reduces the bias gradient.
  std::unique_ptr<LtPlan>& plan = plan_for(LtEpilogue::dgelu, nullptr);
  // Here with a vector to write: DGELU_BGRAD was refused (now or before).
  const bool bgrad_refused = sums_out != nullptr;
  const LtKey shape = aux_epilogue_key(trans_a, trans_b, m, n, k, a, lda, b, ldb, d, ldd,
                                       LtEpilogue::dgelu, aux, ld_aux, nullptr);
  if (plan != nullptr && run(plan, nullptr)) {
    if (bgrad_refused) cache.dgelu_bgrad_refused.insert(shape);
    return LinearDgeluRan::dgelu;
  }
  cache.dgelu_refused.insert(shape);
  return LinearDgeluRan::refused;
}

}  // namespace ringtrain::detail
