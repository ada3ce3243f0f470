#include "optim/state_buffer.h"

#include <cstring>
#include <new>
#include <utility>

#include "optim/cuda_backend.h"

namespace ringtrain {

namespace {
// Cache-line aligned, so the vectorised update loops start on a boundary.
constexpr std::align_val_t kHostAlignment{64};
}  // namespace

StateBuffer::StateBuffer(std::size_t count, Device device) : count_(count), device_(device) {
  if (count == 0) return;
  if (device.is_cuda()) {
    data_ = optim_cuda::alloc_zeroed_f32(count, device.index);
  } else {
    data_ = static_cast<float*>(::operator new[](count * sizeof(float), kHostAlignment));
    std::memset(data_, 0, count * sizeof(float));
  }
}

StateBuffer::~StateBuffer() {
  release();
}

StateBuffer::StateBuffer(StateBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      count_(std::exchange(other.count_, 0)),
      device_(other.device_) {}

StateBuffer& StateBuffer::operator=(StateBuffer&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    count_ = std::exchange(other.count_, 0);
    device_ = other.device_;
  }
  return *this;
}

void StateBuffer::release() noexcept {
  if (data_ == nullptr) return;
  if (device_.is_cuda())
    optim_cuda::free_f32(data_, device_.index);
  else
    ::operator delete[](data_, kHostAlignment);
  data_ = nullptr;
}

}  // namespace ringtrain
