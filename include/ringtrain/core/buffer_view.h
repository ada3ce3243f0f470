// A buffer travels as a typed view {ptr, count, dtype, device}: never as a loose
// void* plus a byte count, so element and byte counts cannot be confused.
#pragma once

#include <cstddef>

#include "ringtrain/core/device.h"
#include "ringtrain/core/dtype.h"

namespace ringtrain {

struct BufferView {
  void* ptr = nullptr;
  std::size_t count = 0;  // elements, not bytes
  DType dtype = DType::f32;
  Device device{};

  std::size_t bytes() const { return count * dtype_size(dtype); }
  // Elements [offset, offset + n) of this view.
  BufferView slice(std::size_t offset, std::size_t n) const {
    return {static_cast<char*>(ptr) + offset * dtype_size(dtype), n, dtype, device};
  }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

template <typename T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::f32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::f64;
}
template <>
constexpr DType dtype_of<int>() {
  return DType::i32;
}
template <>
constexpr DType dtype_of<long>() {
  return DType::i64;
}
template <>
constexpr DType dtype_of<long long>() {
  return DType::i64;
}

template <typename T>
BufferView view_of(T* ptr, std::size_t count, Device device = Device::cpu()) {
  return {static_cast<void*>(ptr), count, dtype_of<T>(), device};
}
// A view of read-only memory, as the source of a copy or a collective.
template <typename T>
BufferView view_of(const T* ptr, std::size_t count, Device device = Device::cpu()) {
  return {const_cast<T*>(ptr), count, dtype_of<T>(), device};
}

}  // namespace ringtrain
