// CUDA build: pinned host slots, device slots and the loader's own copy stream.
#include <algorithm>
#include <cstdlib>
#include <new>

#include "core/cuda/check_cuda.h"
#include "data/batch_staging.h"
#include "kernels/widen_bytes.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

HostStagingBuffer::HostStagingBuffer(std::size_t bytes, bool pinned) : pinned_(pinned) {
  const std::size_t size = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  if (pinned) {
    RT_CUDA_CHECK(cudaMallocHost(&ptr_, size));
  } else {
    ptr_ = std::aligned_alloc(64, size);
    if (!ptr_) throw std::bad_alloc();
  }
}

HostStagingBuffer::~HostStagingBuffer() {
  if (pinned_)
    cudaFreeHost(ptr_);
  else
    std::free(ptr_);
}

DeviceStagingBuffer::DeviceStagingBuffer(std::size_t bytes, Device device) {
  RT_CHECK(device.is_cuda(), "device staging buffer asked for on {}", device_name(device));
  RT_CUDA_CHECK(cudaSetDevice(device.index));
  RT_CUDA_CHECK(cudaMalloc(&ptr_, std::max<std::size_t>(bytes, 1)));
}

DeviceStagingBuffer::~DeviceStagingBuffer() {
  cudaFree(ptr_);
}

CopyStream::CopyStream(Device device) : device_(device) {
  RT_CHECK(device.is_cuda(), "copy stream asked for on {}", device_name(device));
  RT_CUDA_CHECK(cudaSetDevice(device.index));
  cudaStream_t s = nullptr;
  RT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  stream_ = s;
}

CopyStream::~CopyStream() {
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
}

void CopyStream::bind_thread() const {
  RT_CUDA_CHECK(cudaSetDevice(device_.index));
}

void CopyStream::copy_to_device(void* dst, const void* src, std::size_t bytes) {
  RT_CUDA_CHECK(
      cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream_)));
}

void CopyStream::widen_bytes(const void* src, float* dst, std::size_t n,
                             const kernels::ChannelWidening& w) {
  kernels::widen_bytes_cuda(static_cast<const std::uint8_t*>(src), dst, n, w, stream_);
}

void CopyStream::synchronize() {
  RT_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream_)));
}

void copy_device_to_host(void* dst, const void* src, std::size_t bytes, Device device) {
  RT_CUDA_CHECK(cudaSetDevice(device.index));
  RT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

}  // namespace ringtrain
