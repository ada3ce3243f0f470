// The prefetcher on a GPU: batches arrive on the device (copied on the
// loader's own stream from pinned memory) and equal the host reads. uint8
// data crosses as bytes and is widened on the device (kernels/widen_bytes.cu):
// bit for bit read()'s floats, also for images with a transform that
// normalises per channel. Exits 77 (ctest: skipped) without CUDA or without a
// device.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <vector>

#include "data/batch_staging.h"
#include "data/device_widening.h"
#include "ringtrain/data/prefetcher.h"
#include "ringtrain/data/sample_transform.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "tests/data/data_test_files.h"
#include "tests/support/gpu_test.h"

int main() {
  using namespace ringtrain;
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  try {
    cuda_set_device(0);
    const char* d = std::getenv("RINGTRAIN_TEST_DATA_DIR");
    const std::string path = std::string(d ? d : ".") + "/prefetcher-gpu.h5";
    test::write_good_dataset(path, 301, 7, {1, 6, 6}, 9);
    Dataset ds = Dataset::open(path, "train");
    const ShardedSampler sampler(ds.size(), 16, 0, 1, 3);
    Prefetcher p(ds, sampler, {0, 0}, 2, Device::cuda(0));
    std::size_t wrong = 0, checked = 0;
    DataCursor c{0, 0};
    for (std::size_t k = 0; k < 2 * sampler.steps_per_epoch() + 1; ++k, c = sampler.next(c)) {
      const Batch b = p.next();
      if (!b.x.device.is_cuda() || b.cursor != c || b.size != 16) {
        std::printf("FAIL: batch %zu on %s, cursor (%llu,%llu), size %zu\n", k,
                    device_name(b.x.device).c_str(),
                    static_cast<unsigned long long>(b.cursor.epoch),
                    static_cast<unsigned long long>(b.cursor.step), b.size);
        return 1;
      }
      std::vector<float> x(b.x.count), expect(b.x.count);
      std::vector<std::int32_t> y(b.size), expect_y(b.size);
      copy_device_to_host(x.data(), b.x.ptr, b.x.bytes(), b.x.device);
      copy_device_to_host(y.data(), b.y.ptr, b.y.bytes(), b.y.device);
      ds.read(sampler.rank_indices(c), expect.data(), expect_y.data());
      for (std::size_t i = 0; i < x.size(); ++i) wrong += x[i] != expect[i];
      for (std::size_t i = 0; i < y.size(); ++i) wrong += y[i] != expect_y[i];
      checked += x.size() + y.size();
    }
    // Images with a transform: geometry on the loader threads, the per-channel
    // normalisation on the device.
    const std::string images = std::string(d ? d : ".") + "/prefetcher-gpu-images.h5";
    test::write_good_dataset(images, 67, 4, {3, 10, 10}, 5);
    Dataset img = Dataset::open(images, "train");
    img.set_transform(SampleTransform::parse("random_crop(8, padding=1), hflip, "
                                             "normalize(mean=(0.5,0.4,0.3), std=(0.25,0.2,0.3))",
                                             5),
                      2);
    if (!device_widening(ds) || !device_widening(img)) {
      std::printf("FAIL: uint8 batches would not cross as bytes\n");
      return 1;
    }
    const ShardedSampler image_sampler(img.size(), 8, 0, 1, 3);
    Prefetcher images_p(img, image_sampler, {0, 0}, 2, Device::cuda(0));
    c = {0, 0};
    for (std::size_t k = 0; k < 2 * image_sampler.steps_per_epoch() + 1;
         ++k, c = image_sampler.next(c)) {
      const Batch b = images_p.next();
      std::vector<float> x(b.x.count), expect(b.x.count);
      copy_device_to_host(x.data(), b.x.ptr, b.x.bytes(), b.x.device);
      img.read(image_sampler.rank_indices(c), expect.data(), nullptr, c.epoch);
      for (std::size_t i = 0; i < x.size(); ++i) wrong += x[i] != expect[i];
      checked += x.size();
    }
    EvalBatches eval(ds, {0, ds.size()}, 64, 2, Device::cuda(0));
    std::size_t seen = 0;
    while (auto b = eval.next()) {
      if (!b->x.device.is_cuda()) return 1;
      seen += b->size;
    }
    std::printf(
        "prefetcher on cuda:0: %zu values checked, %zu wrong; eval saw %zu of %zu samples\n",
        checked, wrong, seen, ds.size());
    return wrong == 0 && seen == ds.size() ? 0 : 1;
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
}
