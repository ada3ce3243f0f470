// Two paths: native types (f32, f64, i32, i64) take one fused vector pass
// (fused_reduce); f16/bf16 accumulate in f32 through an L1 block
// (reduce_to_many_t). Both follow the same store policy (choose_streams).
#include "comm/elementwise_reduce.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include <unistd.h>

#include "core/multi_isa.h"
#include "kernels/reduce.cuh"
#include "ringtrain/core/check.h"

namespace ringtrain::comm_detail {

namespace {

using kernels::MaxOp;
using kernels::MinOp;
using kernels::SumOp;

// Storage type S, accumulation type A. Load/store convert for 16-bit floats.
struct F16 {
  using S = std::uint16_t;
  using A = float;
  static A load(S v) { return kernels::half_to_float(v); }
  static S store(A v) { return kernels::float_to_half(v); }
};
struct BF16 {
  using S = std::uint16_t;
  using A = float;
  static A load(S v) { return kernels::bf16_to_float(v); }
  static S store(A v) { return kernels::float_to_bf16(v); }
};
template <typename T>
struct Native {
  using S = T;
  using A = T;
  static A load(S v) { return v; }
  static S store(A v) { return v; }
};

// A block fits in L1 alongside the streams it reads.
constexpr std::size_t kBlock = 2048;

// dst = src (src is 64-byte aligned, in L1). Streams when asked and dst allows.
inline void store_block(void* dst, const void* src, std::size_t bytes, bool streaming) {
#if defined(__SSE2__)
  if (streaming && (reinterpret_cast<std::uintptr_t>(dst) & 15u) == 0) {
    auto* d = static_cast<__m128i*>(dst);
    const auto* s = static_cast<const __m128i*>(src);
    const std::size_t vecs = bytes / 16;
    for (std::size_t i = 0; i < vecs; ++i) _mm_stream_si128(d + i, _mm_load_si128(s + i));
    const std::size_t done = vecs * 16;
    if (done < bytes)
      std::memcpy(static_cast<char*>(dst) + done, static_cast<const char*>(src) + done,
                  bytes - done);
    return;
  }
#endif
  (void)streaming;
  std::memcpy(dst, src, bytes);
}

inline void store_fence(bool streaming) {
#if defined(__SSE2__)
  // Streaming stores are weakly ordered: they must be visible before the
  // caller publishes its flag.
  if (streaming) _mm_sfence();
#endif
  (void)streaming;
}

template <typename Traits, typename Op>
void reduce_to_many_t(const void* const* srcs, int nsrc, void* const* dsts, int ndst,
                      std::size_t count, bool avg, int divisor, const std::uint8_t* stream,
                      bool any_stream) {
  using S = typename Traits::S;
  using A = typename Traits::A;
  Op op;
  alignas(64) A acc[kBlock];
  for (std::size_t base = 0; base < count; base += kBlock) {
    const std::size_t n = std::min(kBlock, count - base);
    const S* s0 = static_cast<const S*>(srcs[0]) + base;
    for (std::size_t i = 0; i < n; ++i) acc[i] = Traits::load(s0[i]);
    for (int k = 1; k < nsrc; ++k) {
      const S* s = static_cast<const S*>(srcs[k]) + base;
      for (std::size_t i = 0; i < n; ++i) acc[i] = op(acc[i], Traits::load(s[i]));
    }
    if (avg) {
      const A d = static_cast<A>(divisor);
      for (std::size_t i = 0; i < n; ++i) acc[i] = static_cast<A>(acc[i] / d);
    }
    if constexpr (std::is_same_v<S, A>) {
      for (int k = 0; k < ndst; ++k)
        store_block(static_cast<S*>(dsts[k]) + base, acc, n * sizeof(S), stream[k] != 0);
    } else {
      alignas(64) S packed[kBlock];
      for (std::size_t i = 0; i < n; ++i) packed[i] = Traits::store(acc[i]);
      for (int k = 0; k < ndst; ++k)
        store_block(static_cast<S*>(dsts[k]) + base, packed, n * sizeof(S), stream[k] != 0);
    }
  }
  store_fence(any_stream);
}

// Calls f.template operator()<Op>(avg) for `op`: avg is a sum, then a
// division. Inlined, so that inside a target clone the loop keeps the clone's
// instruction set.
template <typename F>
[[gnu::always_inline]] inline void with_op(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::sum:
      return f.template operator()<SumOp>(false);
    case ReduceOp::avg:
      return f.template operator()<SumOp>(true);
    case ReduceOp::max:
      return f.template operator()<MaxOp>(false);
    case ReduceOp::min:
      return f.template operator()<MinOp>(false);
  }
}

// ---- One pass for native types (f32, f64, i32, i64): each source element
// is loaded once and each result stored once, 64 bytes at a time, with no
// intermediate buffer. A destination may alias a source only at the same
// index (in place), and each vector is fully loaded before it is stored, so
// that is safe. The same code becomes AVX-512, AVX2 or SSE2 (RT_MULTI_ISA).
template <typename T>
struct Vec {
  typedef T type __attribute__((vector_size(64)));
  static constexpr std::size_t width = 64 / sizeof(T);
};

template <typename V>
[[gnu::always_inline]] inline V load_vec(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

template <typename V>
[[gnu::always_inline]] inline void store_vec(void* p, const V& v, bool streaming) {
#if defined(__SSE2__)
  if (streaming) {
    // p is 16-byte aligned (checked by the caller).
    alignas(64) __m128i parts[4];
    std::memcpy(parts, &v, sizeof(V));
    auto* d = static_cast<__m128i*>(p);
    for (int j = 0; j < 4; ++j) _mm_stream_si128(d + j, parts[j]);
    return;
  }
#endif
  (void)streaming;
  std::memcpy(p, &v, sizeof(V));
}

template <typename T, typename Op>
[[gnu::always_inline]] inline void fused_reduce(const void* const* srcs, int nsrc,
                                                void* const* dsts, int ndst, std::size_t count,
                                                bool avg, int divisor, const std::uint8_t* stream,
                                                bool any_stream) {
  using V = typename Vec<T>::type;
  constexpr std::size_t W = Vec<T>::width;
  const Op op;
  const T d = static_cast<T>(divisor);
  auto src = [&](int k) { return static_cast<const T*>(srcs[k]); };
  auto dst = [&](int k) { return static_cast<T*>(dsts[k]); };
  std::size_t i = 0;
  for (; i + W <= count; i += W) {
    V v = load_vec<V>(src(0) + i);
    for (int k = 1; k < nsrc; ++k) v = op(v, load_vec<V>(src(k) + i));
    if (avg) v = v / d;
    for (int k = 0; k < ndst; ++k) store_vec(dst(k) + i, v, stream[k] != 0);
  }
  for (; i < count; ++i) {
    T v = src(0)[i];
    for (int k = 1; k < nsrc; ++k) v = op(v, src(k)[i]);
    if (avg) v = static_cast<T>(v / d);
    for (int k = 0; k < ndst; ++k) dst(k)[i] = v;
  }
  store_fence(any_stream);
}

template <typename T>
[[gnu::always_inline]] inline void fused_reduce_op(ReduceOp op, const void* const* srcs, int nsrc,
                                                   void* const* dsts, int ndst, std::size_t count,
                                                   int divisor, const std::uint8_t* stream,
                                                   bool any_stream) {
  with_op(
      op, [&]<typename Op>(bool avg) __attribute__((always_inline)) {
        fused_reduce<T, Op>(srcs, nsrc, dsts, ndst, count, avg, divisor, stream, any_stream);
      });
}

// Target clones cannot be templates: one entry point per type.
#define RT_FUSED_ENTRY(NAME, T)                                                                \
  RT_MULTI_ISA void NAME(ReduceOp op, const void* const* srcs, int nsrc, void* const* dsts,    \
                         int ndst, std::size_t count, int divisor, const std::uint8_t* stream, \
                         bool any_stream) {                                                    \
    fused_reduce_op<T>(op, srcs, nsrc, dsts, ndst, count, divisor, stream, any_stream);        \
  }
RT_FUSED_ENTRY(fused_reduce_f32, float)
RT_FUSED_ENTRY(fused_reduce_f64, double)
RT_FUSED_ENTRY(fused_reduce_i32, std::int32_t)
RT_FUSED_ENTRY(fused_reduce_i64, std::int64_t)
#undef RT_FUSED_ENTRY

// Which destinations get streaming (non-temporal) stores: they skip the
// read-for-ownership of each line and keep results another core will read out
// of this core's cache. Never in place (the line was just read, and streaming
// it out measured 2-3x slower). Out of place, with L2 this core's share of L2
// and w the bytes this call touches (sources and destinations), measured on 2
// ranks against a concurrent memcpy:
//   w <= L2/2        all cached      streaming is 0.4-0.8x here
//   w >  L2/2        peers streamed, the local destination cached (1.1-1.35x
//                    at 1-4 MiB all-reduces; everything cached: 0.8-1.0x)
//   written >= 4 L2  all streamed    (1.8x at 16 MiB; peers only: 1.3-1.4x)
// Returns whether any destination streams.
bool choose_streams(const void* const* srcs, int nsrc, void* const* dsts, int ndst,
                    std::size_t bytes_per_buffer, const StoreHint& hint, std::uint8_t* stream) {
  static const std::size_t l2 = [] {
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? static_cast<std::size_t>(v) : std::size_t{1} << 20;
  }();
  const std::size_t touched = bytes_per_buffer * static_cast<std::size_t>(nsrc + ndst);
  const std::size_t written = bytes_per_buffer * static_cast<std::size_t>(ndst);
  bool in_place = false;
  for (int k = 0; k < ndst; ++k)
    for (int j = 0; j < nsrc; ++j) in_place |= dsts[k] == srcs[j];
  bool any = false;
  for (int k = 0; k < ndst; ++k) {
    const bool aligned = (reinterpret_cast<std::uintptr_t>(dsts[k]) & 15u) == 0;
    const bool big = k == hint.local_dst ? written >= 4 * l2 : 2 * touched > l2;
    stream[k] = hint.may_stream && !in_place && aligned && big;
    any |= stream[k] != 0;
  }
  return any;
}

template <typename Traits>
void reduce_to_many_op(ReduceOp op, const void* const* srcs, int nsrc, void* const* dsts, int ndst,
                       std::size_t count, int divisor, const std::uint8_t* stream,
                       bool any_stream) {
  with_op(op, [&]<typename Op>(bool avg) {
    reduce_to_many_t<Traits, Op>(srcs, nsrc, dsts, ndst, count, avg, divisor, stream, any_stream);
  });
}

template <typename Traits>
void divide_t(void* buf, std::size_t count, int divisor) {
  using S = typename Traits::S;
  using A = typename Traits::A;
  S* p = static_cast<S*>(buf);
  const A d = static_cast<A>(divisor);
  for (std::size_t i = 0; i < count; ++i)
    p[i] = Traits::store(static_cast<A>(Traits::load(p[i]) / d));
}

// Calls f.template operator()<Traits>() for the dtype.
template <typename F>
void dispatch(DType dtype, F&& f) {
  switch (dtype) {
    case DType::f32:
      return f.template operator()<Native<float>>();
    case DType::f64:
      return f.template operator()<Native<double>>();
    case DType::f16:
      return f.template operator()<F16>();
    case DType::bf16:
      return f.template operator()<BF16>();
    case DType::i32:
      return f.template operator()<Native<std::int32_t>>();
    case DType::i64:
      return f.template operator()<Native<std::int64_t>>();
  }
}

}  // namespace

void reduce_to_many(DType dtype, ReduceOp op, const void* const* srcs, int nsrc, void* const* dsts,
                    int ndst, std::size_t count, int avg_divisor, StoreHint hint) {
  if (count == 0 || ndst == 0) return;
  RT_CHECK(nsrc > 0, "reduce_to_many needs at least one source");
  std::uint8_t few[64];
  std::vector<std::uint8_t> many;
  std::uint8_t* stream = few;
  if (ndst > 64) {
    many.resize(static_cast<std::size_t>(ndst));
    stream = many.data();
  }
  const bool any_stream =
      choose_streams(srcs, nsrc, dsts, ndst, count * dtype_size(dtype), hint, stream);
  switch (dtype) {
    case DType::f32:
      return fused_reduce_f32(op, srcs, nsrc, dsts, ndst, count, avg_divisor, stream, any_stream);
    case DType::f64:
      return fused_reduce_f64(op, srcs, nsrc, dsts, ndst, count, avg_divisor, stream, any_stream);
    case DType::i32:
      return fused_reduce_i32(op, srcs, nsrc, dsts, ndst, count, avg_divisor, stream, any_stream);
    case DType::i64:
      return fused_reduce_i64(op, srcs, nsrc, dsts, ndst, count, avg_divisor, stream, any_stream);
    // 16-bit floats accumulate in f32 through a block buffer.
    case DType::f16:
      return reduce_to_many_op<F16>(op, srcs, nsrc, dsts, ndst, count, avg_divisor, stream,
                                    any_stream);
    case DType::bf16:
      return reduce_to_many_op<BF16>(op, srcs, nsrc, dsts, ndst, count, avg_divisor, stream,
                                     any_stream);
  }
}

void combine(DType dtype, ReduceOp op, void* dst, const void* a, const void* b, std::size_t count) {
  // Two sources, one destination (which may alias either, at the same index);
  // avg counts as sum here. The ring sends or reads the result next: cached.
  const void* srcs[2] = {a, b};
  void* dsts[1] = {dst};
  reduce_to_many(dtype, op == ReduceOp::avg ? ReduceOp::sum : op, srcs, 2, dsts, 1, count, 1,
                 StoreHint{.may_stream = false, .local_dst = 0});
}

void divide(DType dtype, void* buf, std::size_t count, int divisor) {
  if (count == 0 || divisor == 1) return;
  dispatch(dtype, [&]<typename Traits>() { divide_t<Traits>(buf, count, divisor); });
}

void widen_to_f32(DType dtype, const void* src, float* dst, std::size_t count) {
  const auto* s = static_cast<const std::uint16_t*>(src);
  if (dtype == DType::f16) {
    for (std::size_t i = 0; i < count; ++i) dst[i] = kernels::half_to_float(s[i]);
  } else {
    RT_CHECK(dtype == DType::bf16, "widen_to_f32 takes f16 or bf16, not {}", dtype_name(dtype));
    for (std::size_t i = 0; i < count; ++i) dst[i] = kernels::bf16_to_float(s[i]);
  }
}

void narrow_from_f32(DType dtype, const float* src, void* dst, std::size_t count) {
  auto* d = static_cast<std::uint16_t*>(dst);
  if (dtype == DType::f16) {
    for (std::size_t i = 0; i < count; ++i) d[i] = kernels::float_to_half(src[i]);
  } else {
    RT_CHECK(dtype == DType::bf16, "narrow_from_f32 takes f16 or bf16, not {}", dtype_name(dtype));
    for (std::size_t i = 0; i < count; ++i) d[i] = kernels::float_to_bf16(src[i]);
  }
}

}  // namespace ringtrain::comm_detail
