#include "ringtrain/tensor/tensor.h"

#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/tensor/device_memory.h"

namespace ringtrain {

Tensor Tensor::empty(const Shape& shape, DType dtype, Device device) {
  Tensor t;
  const std::size_t bytes = shape.numel() * dtype_size(dtype);
  void* p = device_allocate(bytes, device);
  t.storage_ = std::shared_ptr<void>(p, [device](void* q) { device_free(q, device); });
  t.ptr_ = p;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype, Device device) {
  Tensor t = empty(shape, dtype, device);
  t.fill_zero();
  return t;
}

Tensor Tensor::borrow(void* ptr, const Shape& shape, DType dtype, Device device) {
  RT_CHECK(ptr != nullptr || shape.numel() == 0,
           "cannot borrow a null pointer as a tensor of shape {}", shape.to_string());
  Tensor t;
  t.ptr_ = ptr;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

Tensor Tensor::borrow(const BufferView& buffer, const Shape& shape) {
  RT_CHECK(buffer.count == shape.numel(), "a buffer of {} elements cannot be viewed as shape {}",
           buffer.count, shape.to_string());
  return borrow(buffer.ptr, shape, buffer.dtype, buffer.device);
}

Tensor Tensor::view(std::size_t offset, const Shape& shape) const {
  RT_CHECK(offset + shape.numel() <= numel(),
           "view of {} elements at offset {} exceeds a tensor of shape {}", shape.numel(), offset,
           shape_.to_string());
  Tensor t = *this;
  t.ptr_ = static_cast<char*>(ptr_) + offset * dtype_size(dtype_);
  t.shape_ = shape;
  return t;
}

Tensor Tensor::reshape(const Shape& shape) const {
  RT_CHECK(shape.numel() == numel(), "cannot reshape {} to {}: element counts differ",
           shape_.to_string(), shape.to_string());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

void Tensor::copy_from(const Tensor& src) {
  RT_CHECK(src.dtype_ == dtype_ && src.numel() == numel(),
           "copy from a {} tensor of shape {} into a {} tensor of shape {}", dtype_name(src.dtype_),
           src.shape_.to_string(), dtype_name(dtype_), shape_.to_string());
  copy_view(buffer(), src.buffer());
}

void Tensor::fill_zero() {
  device_zero(ptr_, bytes(), device_);
}

}  // namespace ringtrain
