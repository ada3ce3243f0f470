#include <catch2/catch.hpp>

#include "ringtrain/core/error.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/tensor/device_memory.h"
#include "ringtrain/tensor/tensor.h"
#include "tensor/cuda_memory.h"

using namespace ringtrain;

TEST_CASE("shape: rank, element count, batch and printing", "[tensor]") {
  const Shape s{2, 3, 4};
  CHECK(s.rank() == 3);
  CHECK(s.numel() == 24);
  CHECK(Shape{}.numel() == 1);
  CHECK(Shape{5, 0}.numel() == 0);
  CHECK(s.with_batch(7) == Shape{7, 2, 3, 4});
  CHECK(s.to_string() == "[2, 3, 4]");
  CHECK(Shape(std::vector<std::size_t>{2, 3, 4}) == s);
  CHECK_THROWS_AS(Shape(std::vector<std::size_t>(7, 1)), Error);
}

TEST_CASE("tensor: owning, views share storage, borrowing does not own", "[tensor]") {
  Tensor t = Tensor::zeros({3, 5}, DType::f32, Device::cpu());
  CHECK(t.owns_memory());
  CHECK(t.numel() == 15);
  CHECK(t.bytes() == 60);
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0);
  for (std::size_t i = 0; i < 15; ++i) CHECK(t.data_as<float>()[i] == 0.0f);
  Tensor row;
  {
    Tensor owner = Tensor::empty({4, 3}, DType::f32, Device::cpu());
    for (std::size_t i = 0; i < 12; ++i) owner.data_as<float>()[i] = static_cast<float>(i) * 1.5f;
    row = owner.view(6, {3});  // keeps the storage alive after `owner` goes
  }
  CHECK(row.data_as<float>()[0] == 9.0f);
  CHECK(row.data_as<float>()[2] == 12.0f);
  CHECK_THROWS_AS(row.view(2, {2}), Error);

  std::vector<float> host = {1, 2, 3, 4, 5, 6};
  Tensor b = Tensor::borrow(host.data(), {2, 3}, DType::f32, Device::cpu());
  CHECK_FALSE(b.owns_memory());
  CHECK(b.reshape({3, 2}).data() == host.data());
  CHECK_THROWS_AS(b.reshape({4, 2}), Error);
  CHECK(Tensor::borrow(view_of(host.data(), host.size()), {6}).data() == host.data());
  CHECK_THROWS_AS(Tensor::borrow(view_of(host.data(), host.size()), {5}), Error);

  Tensor c = Tensor::empty({6}, DType::f32, Device::cpu());
  c.copy_from(b);
  CHECK(c.data_as<float>()[5] == 6.0f);
  CHECK_THROWS_AS(c.copy_from(Tensor::zeros({5}, DType::f32, Device::cpu())), Error);
  Tensor e = Tensor::empty({0}, DType::f32, Device::cpu());
  CHECK(e.numel() == 0);
}

TEST_CASE("tensor: a GPU tensor in a CPU-only build is a clear error", "[tensor]") {
  if (!cuda_compiled())
    CHECK_THROWS_WITH(Tensor::empty({4}, DType::f32, Device::cuda(0)),
                      Catch::Contains("without CUDA"));
}

TEST_CASE("device memory use: allocations add, releases subtract, the peak stays", "[tensor]") {
  // The accounting behind bench step's device_memory_peak_bytes, driven as the
  // GPU allocators drive it.
  const DeviceMemoryUse before = device_memory_use();
  detail::note_device_allocated(1000);
  detail::note_device_allocated(500);
  DeviceMemoryUse now = device_memory_use();
  CHECK(now.in_use == before.in_use + 1500);
  CHECK(now.peak >= before.in_use + 1500);
  detail::note_device_freed(1000);
  now = device_memory_use();
  CHECK(now.in_use == before.in_use + 500);
  CHECK(now.peak >= before.in_use + 1500);
  detail::note_device_freed(500);
  CHECK(device_memory_use().in_use == before.in_use);
  // CPU tensors are not device memory.
  const Tensor t = Tensor::empty({1024}, DType::f32, Device::cpu());
  CHECK(device_memory_use().in_use == before.in_use);
}

TEST_CASE("device memory use: the largest allocations live at the peak, largest first",
          "[tensor]") {
  // Sizes far above anything else this process allocates, so that a new
  // peak is reached and these are its largest.
  const std::size_t base = device_memory_use().peak + (std::size_t{1} << 40);
  detail::note_device_allocated(base + 300);
  detail::note_device_allocated(base + 100);
  detail::note_device_allocated(7);
  DeviceMemoryUse now = device_memory_use();
  REQUIRE(now.largest_at_peak.size() >= 3);
  CHECK(now.largest_at_peak[0] == base + 300);
  CHECK(now.largest_at_peak[1] == base + 100);
  // A release and a smaller allocation leave the peak's list as it was.
  detail::note_device_freed(base + 300);
  detail::note_device_allocated(base + 200);
  now = device_memory_use();
  CHECK(now.largest_at_peak[0] == base + 300);
  CHECK(now.largest_at_peak[1] == base + 100);
  // A new peak lists what is live then.
  detail::note_device_allocated(base + 250);
  now = device_memory_use();
  CHECK(now.largest_at_peak[0] == base + 250);
  CHECK(now.largest_at_peak[1] == base + 200);
  CHECK(now.largest_at_peak[2] == base + 100);
  CHECK(now.largest_at_peak.size() <= kPeakAllocationsKept);
  for (const std::size_t b : {base + 250, base + 200, base + 100, std::size_t{7}})
    detail::note_device_freed(b);
}
