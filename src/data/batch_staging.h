// Memory for the prefetcher's batch slots and the host-to-device copy, behind
// an interface without CUDA types. The CUDA build implements it in
// src/data/cuda/batch_staging.cpp (pinned host memory from cudaMallocHost, a
// device buffer, a copy stream of its own); the CPU-only build in
// batch_staging_nocuda.cpp (plain host memory; a GPU device is an Error).
#pragma once

#include <cstddef>

#include "kernels/widen_bytes.cuh"
#include "ringtrain/core/device.h"

namespace ringtrain {

// Host memory for one batch: page-locked when `pinned`, so that the H2D copy
// is a true asynchronous DMA.
class HostStagingBuffer {
 public:
  HostStagingBuffer(std::size_t bytes, bool pinned);
  ~HostStagingBuffer();
  HostStagingBuffer(const HostStagingBuffer&) = delete;
  HostStagingBuffer& operator=(const HostStagingBuffer&) = delete;
  void* data() const { return ptr_; }
  bool pinned() const { return pinned_; }

 private:
  void* ptr_ = nullptr;
  bool pinned_ = false;
};

class DeviceStagingBuffer {
 public:
  DeviceStagingBuffer(std::size_t bytes, Device device);
  ~DeviceStagingBuffer();
  DeviceStagingBuffer(const DeviceStagingBuffer&) = delete;
  DeviceStagingBuffer& operator=(const DeviceStagingBuffer&) = delete;
  void* data() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
};

// A CUDA stream owned by the loader thread, apart from the compute stream, so
// the copy of batch k+1 overlaps step k.
class CopyStream {
 public:
  explicit CopyStream(Device device);
  ~CopyStream();
  CopyStream(const CopyStream&) = delete;
  CopyStream& operator=(const CopyStream&) = delete;
  // Makes the device current on the calling thread (the loader thread).
  void bind_thread() const;
  void copy_to_device(void* dst, const void* src, std::size_t bytes);
  // Widens n bytes on the device into floats (kernels/widen_bytes.cu), after
  // the copies issued before it on this stream.
  void widen_bytes(const void* src, float* dst, std::size_t n, const kernels::ChannelWidening& w);
  void* stream() const { return stream_; }  // cudaStream_t
  // Waits for the copies issued so far.
  void synchronize();

 private:
  Device device_;
  void* stream_ = nullptr;
};

// Blocking device-to-host copy, for checks and tools (not the hot path).
void copy_device_to_host(void* dst, const void* src, std::size_t bytes, Device device);

}  // namespace ringtrain
