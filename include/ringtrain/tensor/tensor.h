// A tensor is a view: a pointer with a shape, a dtype and a device. It either
// owns its memory (shared, so views taken from it keep it alive) or borrows
// memory that someone else owns, such as a slice of the model's flat parameter
// buffer. Making or reshaping a view allocates nothing.
#pragma once

#include <cstddef>
#include <memory>

#include "ringtrain/core/buffer_view.h"
#include "ringtrain/core/device.h"
#include "ringtrain/core/dtype.h"
#include "ringtrain/tensor/shape.h"

namespace ringtrain {

class Tensor {
 public:
  Tensor() = default;

  // Owning, uninitialised / zeroed memory on `device`.
  static Tensor empty(const Shape& shape, DType dtype, Device device);
  static Tensor zeros(const Shape& shape, DType dtype, Device device);
  // Borrowing: the caller keeps `ptr` alive for as long as the view is used.
  static Tensor borrow(void* ptr, const Shape& shape, DType dtype, Device device);
  // Borrowing a typed buffer; shape.numel() must equal buffer.count.
  static Tensor borrow(const BufferView& buffer, const Shape& shape);

  void* data() const { return ptr_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(ptr_);
  }
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  std::size_t numel() const { return shape_.numel(); }
  std::size_t bytes() const { return numel() * dtype_size(dtype_); }
  bool owns_memory() const { return storage_ != nullptr; }
  bool defined() const { return ptr_ != nullptr || numel() == 0; }

  // Elements [offset, offset + shape.numel()) seen as `shape`; shares ownership.
  Tensor view(std::size_t offset, const Shape& shape) const;
  // The same elements under another shape with the same element count.
  Tensor reshape(const Shape& shape) const;
  BufferView buffer() const { return {ptr_, numel(), dtype_, device_}; }

  // Synchronous copy of the elements of `src` (same dtype and count, any device).
  void copy_from(const Tensor& src);
  void fill_zero();

 private:
  std::shared_ptr<void> storage_;
  void* ptr_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_{};
};

}  // namespace ringtrain
