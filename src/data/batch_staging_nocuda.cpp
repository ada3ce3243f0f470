// CPU-only build: batches live in ordinary host memory; a GPU cannot be asked for.
#include <algorithm>
#include <cstdlib>
#include <new>

#include "data/batch_staging.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

HostStagingBuffer::HostStagingBuffer(std::size_t bytes, bool pinned) {
  RT_CHECK(!pinned, "pinned host memory needs a CUDA build (this ringtrain is CPU-only)");
  // 64-byte aligned so the float conversion vectorises on whole cache lines.
  ptr_ = std::aligned_alloc(64, (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64);
  if (!ptr_) throw std::bad_alloc();
}
HostStagingBuffer::~HostStagingBuffer() {
  std::free(ptr_);
}

DeviceStagingBuffer::DeviceStagingBuffer(std::size_t, Device device) {
  RT_CHECK(false, "batches on {} need a CUDA build (this ringtrain is CPU-only)",
           device_name(device));
}
DeviceStagingBuffer::~DeviceStagingBuffer() = default;

CopyStream::CopyStream(Device device) : device_(device) {
  RT_CHECK(false, "a copy stream for {} needs a CUDA build (this ringtrain is CPU-only)",
           device_name(device));
}
CopyStream::~CopyStream() = default;
void CopyStream::bind_thread() const {}
void CopyStream::copy_to_device(void*, const void*, std::size_t) {}
void CopyStream::widen_bytes(const void*, float*, std::size_t, const kernels::ChannelWidening&) {}
void CopyStream::synchronize() {}

void copy_device_to_host(void*, const void*, std::size_t, Device device) {
  RT_CHECK(false, "a copy from {} needs a CUDA build (this ringtrain is CPU-only)",
           device_name(device));
}

}  // namespace ringtrain
