#include "apps/bench_test_data.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/reduce.cuh"

namespace ringtrain::apps {

namespace {

// Quarter steps in [-12, 12] for floats (exact in every float type), a wide
// range for integers, so a misplaced chunk is always seen.
double value_of(std::uint64_t seed, int rank, std::size_t i) {
  const std::uint64_t h =
      (seed * 2654435761u + static_cast<std::uint64_t>(rank) * 7919u + i * 31u + (i >> 7) * 17u) %
      97u;
  return (static_cast<double>(h) - 48.0) * 0.25;
}
std::int64_t int_of(std::uint64_t seed, int rank, std::size_t i) {
  return static_cast<std::int64_t>(
             (seed * 1000003u + static_cast<std::uint64_t>(rank) * 104729u + i * 7u) % 200003u) -
         100000;
}

}  // namespace

void fill_test_data(BufferView v, std::uint64_t seed, int rank) {
  for (std::size_t i = 0; i < v.count; ++i) {
    const double x = value_of(seed, rank, i);
    switch (v.dtype) {
      case DType::f32:
        v.as<float>()[i] = static_cast<float>(x);
        break;
      case DType::f64:
        v.as<double>()[i] = x;
        break;
      case DType::f16:
        v.as<std::uint16_t>()[i] = kernels::float_to_half(static_cast<float>(x));
        break;
      case DType::bf16:
        v.as<std::uint16_t>()[i] = kernels::float_to_bf16(static_cast<float>(x));
        break;
      case DType::i32:
        v.as<std::int32_t>()[i] = static_cast<std::int32_t>(int_of(seed, rank, i));
        break;
      case DType::i64:
        v.as<std::int64_t>()[i] = int_of(seed, rank, i);
        break;
    }
  }
}

namespace {

double load(BufferView v, std::size_t i) {
  switch (v.dtype) {
    case DType::f32:
      return v.as<float>()[i];
    case DType::f64:
      return v.as<double>()[i];
    case DType::f16:
      return kernels::half_to_float(v.as<std::uint16_t>()[i]);
    case DType::bf16:
      return kernels::bf16_to_float(v.as<std::uint16_t>()[i]);
    case DType::i32:
      return v.as<std::int32_t>()[i];
    case DType::i64:
      return static_cast<double>(v.as<std::int64_t>()[i]);
  }
  return 0;
}

double rel_eps(DType t) {
  switch (t) {
    case DType::f32:
      return 1.2e-7;
    case DType::f64:
      return 2.3e-16;
    case DType::f16:
      return 9.8e-4;
    case DType::bf16:
      return 7.9e-3;
    default:
      return 0;
  }
}

}  // namespace

// rounding_steps: how often the backend may round a partial sum in the
// element type (communicator.h): 1 on the CPU backends, n + 1 for NCCL.
std::size_t count_wrong_reduction(BufferView out, ReduceOp op, int n, std::uint64_t seed,
                                  int rounding_steps) {
  std::size_t wrong = 0;
  const bool is_float = dtype_is_float(out.dtype);
  for (std::size_t i = 0; i < out.count; ++i) {
    if (is_float) {
      double acc = value_of(seed, 0, i);
      for (int r = 1; r < n; ++r) {
        const double v = value_of(seed, r, i);
        acc = op == ReduceOp::max   ? std::max(acc, v)
              : op == ReduceOp::min ? std::min(acc, v)
                                    : acc + v;
      }
      double magnitude = 0;
      for (int r = 0; r < n; ++r) magnitude += std::fabs(value_of(seed, r, i));
      if (op == ReduceOp::avg) {
        acc /= n;
        magnitude /= n;
      }
      if (op == ReduceOp::max || op == ReduceOp::min) magnitude = std::fabs(acc);
      wrong += std::fabs(load(out, i) - acc) >
               rel_eps(out.dtype) * (magnitude + 1.0) * 2.0 * rounding_steps;
    } else {
      std::int64_t acc = int_of(seed, 0, i);
      for (int r = 1; r < n; ++r) {
        const std::int64_t v = int_of(seed, r, i);
        acc = op == ReduceOp::max   ? std::max(acc, v)
              : op == ReduceOp::min ? std::min(acc, v)
                                    : acc + v;
      }
      if (op == ReduceOp::avg) acc /= n;
      const std::int64_t got =
          out.dtype == DType::i32 ? out.as<std::int32_t>()[i] : out.as<std::int64_t>()[i];
      wrong += got != acc;
    }
  }
  return wrong;
}

std::size_t count_wrong_copy(BufferView out, std::uint64_t seed, int rank) {
  std::vector<char> expect(out.bytes());
  fill_test_data({expect.data(), out.count, out.dtype, Device::cpu()}, seed, rank);
  std::size_t wrong = 0;
  const std::size_t es = dtype_size(out.dtype);
  for (std::size_t i = 0; i < out.count; ++i)
    wrong +=
        std::memcmp(static_cast<const char*>(out.ptr) + i * es, expect.data() + i * es, es) != 0;
  return wrong;
}

}  // namespace ringtrain::apps
