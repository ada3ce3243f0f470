// The stored products through cuBLASLt (gemm_stored_epilogue, gemm.h) against
// the CPU: 16-bit A and B on the --precision grid, the sum over k in fp32
// (the CPU's in double, then rounded to fp32), the fp32 bias added, and the
// 16-bit output rounded once. The GPU's fp32 sum differs from the CPU's only
// by summation order, so a 16-bit output may differ by one step of the grid
// where that order moves it across a rounding boundary. That is rare: at
// least 95% of the words (all but one, for the smallest shapes) must be the
// CPU's exactly, which a double rounding (a bias added after a rounded
// product) would miss by far. An fp32 output (dW, an fp32 dx) is checked
// within fp32 accumulation error. The bias-gradient epilogue is checked with
// and without accumulation (the epilogue overwrites; the op adds through a
// scratch), and with vectors away from 16-byte alignment (staged). Exits 77
// (ctest: skipped) without CUDA or a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/precision.cuh"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/ops/compute_context.h"
#include "ringtrain/ops/gemm.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/grid_values.h"
#include "tests/model/test_data.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

using Words = std::vector<std::uint16_t>;

// Row-major op(A) [m, k] and op(B) [k, n] elements, as gemm reads them.
float at(const std::vector<float>& a, bool trans, std::size_t ld, std::size_t r, std::size_t c) {
  return trans ? a[c * ld + r] : a[r * ld + c];
}

struct Reference {
  std::vector<float> d;       // fp32: the sum over k plus the bias (plus beta D)
  std::vector<double> bound;  // fp32 accumulation error bound per element
  std::vector<float> db;      // the sums of op(A)'s rows over k (plus db0)
  std::vector<double> db_bound;
};

Reference reference(bool ta, bool tb, std::size_t m, std::size_t n, std::size_t k,
                    const std::vector<float>& a, const std::vector<float>& b, const float* bias,
                    const std::vector<float>* d0, const std::vector<float>* db0) {
  Reference r;
  r.d.resize(m * n);
  r.bound.resize(m * n);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      double s = 0.0, abs_sum = 0.0;
      for (std::size_t q = 0; q < k; ++q) {
        const double prod =
            static_cast<double>(at(a, ta, ta ? m : k, i, q)) * at(b, tb, tb ? k : n, q, j);
        s += prod;
        abs_sum += std::abs(prod);
      }
      if (bias != nullptr) s += bias[j];
      if (d0 != nullptr) s += (*d0)[i * n + j];
      r.d[i * n + j] = static_cast<float>(s);
      // fp32 accumulation in any order: k roundings of partial sums, each
      // within 2^-24 of a partial sum bounded by abs_sum (plus the bias and
      // D's own terms).
      const double extra = (bias != nullptr ? std::abs(bias[j]) : 0.0) +
                           (d0 != nullptr ? std::abs((*d0)[i * n + j]) : 0.0);
      r.bound[i * n + j] = static_cast<double>(k + 2) * 0x1.0p-24 * (abs_sum + extra) + 1e-30;
    }
  r.db.resize(m);
  r.db_bound.resize(m);
  for (std::size_t i = 0; i < m; ++i) {
    double s = db0 != nullptr ? (*db0)[i] : 0.0, abs_sum = std::abs(s);
    for (std::size_t q = 0; q < k; ++q) {
      s += at(a, ta, ta ? m : k, i, q);
      abs_sum += std::abs(at(a, ta, ta ? m : k, i, q));
    }
    r.db[i] = static_cast<float>(s);
    r.db_bound[i] = static_cast<double>(k + 2) * 0x1.0p-24 * abs_sum + 1e-30;
  }
  return r;
}

// One step of the 16-bit grid at |x| (the larger one where x is a power of two;
// the subnormal step below the normal range).
double grid_step(float x, DType p) {
  const int mantissa = p == DType::f16 ? 10 : 7;
  const double ax =
      std::max(static_cast<double>(std::abs(x)), p == DType::f16 ? 0x1.0p-14 : 0x1.0p-126);
  return std::ldexp(1.0, std::ilogb(ax) - mantissa);
}

// A 16-bit output against the reference rounded once: each within one grid
// step (plus the fp32 error), and at least 95% of them the same words.
void require_rounded_once(const std::vector<float>& gpu, const Reference& r, DType p,
                          const char* what) {
  REQUIRE(gpu.size() == r.d.size());
  std::size_t exact = 0, far = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const float want = kernels::round_to_precision_grid(r.d[i], p);
    if (gpu[i] == want) ++exact;
    if (!(std::abs(static_cast<double>(gpu[i]) - want) <= grid_step(want, p) + r.bound[i])) ++far;
  }
  INFO(what << " (" << dtype_name(p) << "): " << exact << " of " << gpu.size() << " exact, " << far
            << " beyond one grid step");
  CHECK(far == 0);
  // 5% of the words may differ (one at least, for the smallest shapes).
  CHECK(exact + std::max<std::size_t>(1, gpu.size() / 20) >= gpu.size());
}

void require_fp32(const std::vector<float>& gpu, const std::vector<float>& want,
                  const std::vector<double>& bound, const char* what) {
  REQUIRE(gpu.size() == want.size());
  std::size_t far = 0;
  for (std::size_t i = 0; i < gpu.size(); ++i)
    if (!(std::abs(static_cast<double>(gpu[i]) - want[i]) <= bound[i])) ++far;
  INFO(what << ": " << far << " of " << gpu.size() << " beyond fp32 accumulation error");
  CHECK(far == 0);
}

struct Shape3 {
  std::size_t m, n, k;
};
// Odd sizes, a single row, tensor-core-friendly multiples, a GPT-like width.
const Shape3 kShapes[] = {{1, 8, 16}, {5, 7, 12}, {37, 24, 40}, {64, 96, 128}, {130, 48, 200}};

}  // namespace

TEST_CASE("gpu cublasLt forward: y = round16(x Wᵀ + b) in one GEMM, bias or none", "[gpu]") {
  for (const DType p : {DType::bf16, DType::f16}) {
    const auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
    for (const Shape3& s : kShapes) {
      INFO(dtype_name(p) << " " << s.m << " x " << s.n << " x " << s.k);
      const auto x = on_grid(1, s.m * s.k, p);
      const auto w = on_grid(2, s.n * s.k, p);
      // A bias of either sign, larger than most products, so that where it is
      // added (before or after a rounding) shows.
      const auto bias = hashed_vector(3, s.n + 1, -4.0f, 4.0f);
      const Tensor x16 = words_on(x, p, kGpu), w16 = words_on(w, p, kGpu);
      const Tensor b = to_gpu(bias);
      for (const bool with_bias : {true, false}) {
        Tensor y = Tensor::empty({s.m * s.n}, p, kGpu);
        gemm_stored_epilogue(*ctx, false, true, s.m, s.n, s.k, x16.buffer(), s.k, w16.buffer(), s.k,
                             0.0f, y.buffer(), s.n, with_bias ? b.data_as<float>() : nullptr);
        const Reference r = reference(false, true, s.m, s.n, s.k, x, w,
                                      with_bias ? bias.data() : nullptr, nullptr, nullptr);
        require_rounded_once(widened_values(y, *ctx), r, p, with_bias ? "y with bias" : "y");
      }
      // A bias 4 bytes past 16-byte alignment (a parameter at an odd offset of
      // the flat buffer): staged, same numbers.
      Tensor y = Tensor::empty({s.m * s.n}, p, kGpu);
      gemm_stored_epilogue(*ctx, false, true, s.m, s.n, s.k, x16.buffer(), s.k, w16.buffer(), s.k,
                           0.0f, y.buffer(), s.n, b.data_as<float>() + 1);
      const Reference r =
          reference(false, true, s.m, s.n, s.k, x, w, bias.data() + 1, nullptr, nullptr);
      require_rounded_once(widened_values(y, *ctx), r, p, "y with a misaligned bias");
      // The cached plan gives the same words again.
      Tensor again = Tensor::empty({s.m * s.n}, p, kGpu);
      gemm_stored_epilogue(*ctx, false, true, s.m, s.n, s.k, x16.buffer(), s.k, w16.buffer(), s.k,
                           0.0f, again.buffer(), s.n, b.data_as<float>() + 1);
      CHECK(widened_values(again, *ctx) == widened_values(y, *ctx));
    }
    // Where cuBLASLt refuses an fp32 bias with a 16-bit output, the op adds it
    // apart (the same numbers): say so in the log, since then the epilogue
    // this test is about did not run.
    if (const std::size_t apart = gemm_stored_bias_apart(*ctx); apart > 0)
      WARN(dtype_name(p) << ": cuBLASLt refused the fp32 bias epilogue for " << apart
                         << " shape(s); the bias was added apart");
  }
}

TEST_CASE("gpu cublasLt dx = dy W in 16 bits (rounded once) and in fp32", "[gpu]") {
  for (const DType p : {DType::bf16, DType::f16}) {
    const auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
    for (const Shape3& s : kShapes) {
      // dx [m, n] = dy [m, k] W [k, n].
      INFO(dtype_name(p) << " " << s.m << " x " << s.n << " x " << s.k);
      const auto dy = on_grid(4, s.m * s.k, p);
      const auto w = on_grid(5, s.k * s.n, p);
      const Tensor dy16 = words_on(dy, p, kGpu), w16 = words_on(w, p, kGpu);
      const Reference r = reference(false, false, s.m, s.n, s.k, dy, w, nullptr, nullptr, nullptr);
      Tensor dx16 = Tensor::empty({s.m * s.n}, p, kGpu);
      gemm_stored_epilogue(*ctx, false, false, s.m, s.n, s.k, dy16.buffer(), s.k, w16.buffer(), s.n,
                           0.0f, dx16.buffer(), s.n);
      require_rounded_once(widened_values(dx16, *ctx), r, p, "dx (16-bit)");
      Tensor dx32 = Tensor::empty({s.m * s.n}, DType::f32, kGpu);
      gemm_stored_epilogue(*ctx, false, false, s.m, s.n, s.k, dy16.buffer(), s.k, w16.buffer(), s.n,
                           0.0f, dx32.buffer(), s.n);
      require_fp32(widened_values(dx32, *ctx), r.d, r.bound, "dx (fp32)");
    }
  }
}

TEST_CASE("gpu cublasLt dW = dyᵀ x with the bias-gradient epilogue, overwritten and accumulated",
          "[gpu]") {
  for (const DType p : {DType::bf16, DType::f16}) {
    const auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
    for (const Shape3& s : kShapes) {
      // dW [out, in] = dyᵀ x with dy [rows, out], x [rows, in]: m = out, n = in, k = rows.
      const std::size_t out = s.m, in = s.n, rows = s.k;
      INFO(dtype_name(p) << " out " << out << " in " << in << " rows " << rows);
      const auto dy = on_grid(6, rows * out, p);
      const auto x = on_grid(7, rows * in, p);
      const Tensor dy16 = words_on(dy, p, kGpu), x16 = words_on(x, p, kGpu);
      const auto dw0 = hashed_vector(8, out * in);
      const auto db0 = hashed_vector(9, out + 1);
      for (const bool accumulate : {false, true}) {
        for (const std::size_t offset : {std::size_t{0}, std::size_t{1}}) {  // 1: misaligned db
          INFO((accumulate ? "accumulated" : "overwritten") << ", db at offset " << offset);
          Tensor dw = to_gpu(dw0);
          Tensor db_all = to_gpu(db0);
          float* db = db_all.data_as<float>() + offset;
          gemm_stored_epilogue(*ctx, true, false, out, in, rows, dy16.buffer(), out, x16.buffer(),
                               in, accumulate ? 1.0f : 0.0f, dw.buffer(), in, nullptr, db,
                               accumulate);
          const std::vector<float> db_start(
              db0.begin() + static_cast<std::ptrdiff_t>(offset),
              db0.begin() + static_cast<std::ptrdiff_t>(offset + out));
          const Reference r =
              reference(true, false, out, in, rows, dy, x, nullptr, accumulate ? &dw0 : nullptr,
                        accumulate ? &db_start : nullptr);
          require_fp32(widened_values(dw, *ctx), r.d, r.bound, "dW");
          const std::vector<float> db_all_host = widened_values(db_all, *ctx);
          const std::vector<float> db_host(
              db_all_host.begin() + static_cast<std::ptrdiff_t>(offset),
              db_all_host.begin() + static_cast<std::ptrdiff_t>(offset + out));
          require_fp32(db_host, r.db, r.db_bound, "db");
          // The element before or after db untouched.
          const std::size_t outside = offset == 1 ? 0 : out;
          CHECK(db_all_host[outside] == db0[outside]);
        }
      }
    }
  }
}

TEST_CASE("gpu cublasLt with no rows: dW and db zeroed, or kept when accumulating", "[gpu]") {
  const DType p = DType::bf16;
  const auto ctx = ComputeContext::create(kGpu, Tf32Mode::off, p);
  const std::size_t out = 6, in = 10;
  const Tensor dy16 = Tensor::empty({1}, p, kGpu), x16 = Tensor::empty({1}, p, kGpu);
  const auto dw0 = hashed_vector(10, out * in);
  const auto db0 = hashed_vector(11, out);
  for (const bool accumulate : {false, true}) {
    Tensor dw = to_gpu(dw0), db = to_gpu(db0);
    gemm_stored_epilogue(*ctx, true, false, out, in, 0, dy16.buffer(), out, x16.buffer(), in,
                         accumulate ? 1.0f : 0.0f, dw.buffer(), in, nullptr, db.data_as<float>(),
                         accumulate);
    CHECK(widened_values(dw, *ctx) == (accumulate ? dw0 : std::vector<float>(out * in, 0.0f)));
    CHECK(widened_values(db, *ctx) == (accumulate ? db0 : std::vector<float>(out, 0.0f)));
  }
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
