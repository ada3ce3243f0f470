// Element types that travel through collectives and tensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ringtrain {

enum class DType : std::uint8_t { f32, f64, f16, bf16, i32, i64 };

inline constexpr DType kAllDTypes[] = {DType::f32,  DType::f64, DType::f16,
                                       DType::bf16, DType::i32, DType::i64};

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::f16:
      return 2;
    case DType::bf16:
      return 2;
    case DType::i32:
      return 4;
    case DType::i64:
      return 8;
  }
  return 0;
}

constexpr bool dtype_is_float(DType t) {
  return t == DType::f32 || t == DType::f64 || t == DType::f16 || t == DType::bf16;
}

std::string_view dtype_name(DType t);
// Throws ringtrain::Error naming the bad value and the accepted ones.
DType parse_dtype(std::string_view name);

}  // namespace ringtrain
