// A zeroed, owned f32 buffer on the CPU or a CUDA device: an optimizer's state
// (momentum, Adam moments). Move-only; frees its memory on the right device.
#pragma once

#include <cstddef>

#include "ringtrain/core/buffer_view.h"

namespace ringtrain {

class StateBuffer {
 public:
  StateBuffer() = default;
  StateBuffer(std::size_t count, Device device);
  ~StateBuffer();
  StateBuffer(StateBuffer&& other) noexcept;
  StateBuffer& operator=(StateBuffer&& other) noexcept;
  StateBuffer(const StateBuffer&) = delete;
  StateBuffer& operator=(const StateBuffer&) = delete;

  float* data() const { return data_; }
  std::size_t count() const { return count_; }
  BufferView view() const { return {data_, count_, DType::f32, device_}; }

 private:
  void release() noexcept;
  float* data_ = nullptr;
  std::size_t count_ = 0;
  Device device_{};
};

}  // namespace ringtrain
