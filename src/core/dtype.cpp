#include "ringtrain/core/dtype.h"

#include "ringtrain/core/check.h"

namespace ringtrain {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32:
      return "f32";
    case DType::f64:
      return "f64";
    case DType::f16:
      return "f16";
    case DType::bf16:
      return "bf16";
    case DType::i32:
      return "i32";
    case DType::i64:
      return "i64";
  }
  return "?";
}

DType parse_dtype(std::string_view name) {
  for (DType t : kAllDTypes)
    if (dtype_name(t) == name) return t;
  if (name == "float" || name == "float32") return DType::f32;
  if (name == "double" || name == "float64") return DType::f64;
  if (name == "half" || name == "float16") return DType::f16;
  if (name == "bfloat16") return DType::bf16;
  if (name == "int32") return DType::i32;
  if (name == "int64") return DType::i64;
  RT_CHECK(false, "unknown dtype '{}' (expected one of f32, f64, f16, bf16, i32, i64)", name);
}

}  // namespace ringtrain
