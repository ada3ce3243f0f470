// Small HDF5 files for the data tests, good and deliberately broken, written
// with the raw HDF5 C API so that the broken ones can be anything a user might
// hand us. Sample values depend on (index, element) so a misplaced row shows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain::test {

// The byte stored at element e of sample i in the good files.
inline std::uint8_t sample_byte(std::uint64_t i, std::size_t e) {
  return static_cast<std::uint8_t>((i * 131u + e * 7u + (i >> 8)) & 0xFF);
}
inline std::int32_t sample_label(std::uint64_t i, int classes) {
  return static_cast<std::int32_t>((i * 7u + 3u) % static_cast<std::uint64_t>(classes));
}

// A good file: /train with n samples and /test with n_test, uint8 x of shape
// `shape`, int32 y, num_classes, class_names, scale 1/255, offset -0.5.
void write_good_dataset(const std::string& path, std::size_t n, std::size_t n_test,
                        const std::vector<std::size_t>& shape, int classes);

enum class Breakage {
  no_split,        // the file has /test only
  no_x,            // /train has y only
  xy_mismatch,     // x has n rows, y has n - 1
  label_range,     // one label equals num_classes
  bad_dtype,       // x is int16
  truncated,       // a good file cut in half
  not_hdf5,        // bytes that are not HDF5
  no_num_classes,  // the attribute is missing
  nonfinite,       // float32 x with a NaN (sample 7, element 5) and an Inf (sample 30)
  empty_test,      // a good /train beside a /test of 0 samples
  no_test_labels,  // a good /train beside a /test with x only (data nobody labelled)
};
void write_broken_dataset(const std::string& path, Breakage b);

// All of the above into `dir` (good.h5 and one file per breakage), for the CLI tests.
void write_all_fixtures(const std::string& dir);

}  // namespace ringtrain::test
