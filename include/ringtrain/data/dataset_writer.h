// Writes a ringtrain HDF5 dataset (format in dataset.h), split by split, in
// streaming appends so that a converter never holds a large input twice. The
// file is written under a temporary name and renamed by commit(), so a killed
// converter never leaves a half-written dataset behind under the real name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/data/dataset.h"

namespace ringtrain {

struct SplitSpec {
  std::string name;  // train, test, val
  std::size_t n = 0;
  std::vector<std::size_t> sample_shape;
  SampleDType dtype = SampleDType::f32;
  int num_classes = 0;
  std::vector<std::string> class_names;  // empty or num_classes entries
  float scale = 1.0f, offset = 0.0f;     // written for uint8 data
  // false: data nobody has labelled (for predict); the split has no y, and
  // append takes y = nullptr. num_classes is still the model's output classes.
  bool labelled = true;
  // n is an upper bound: end_split() shrinks the split to the samples
  // appended (a converter that skips bad inputs learns how many only at the end).
  bool may_end_short = false;
  // "jpeg": x is a 1-D dataset of variable-length byte strings (one encoded
  // image each) with attributes encoding, channels, height and width (0 and 0
  // when sizes vary); sample_shape is then (C, H, W) with those values. "":
  // fixed-size samples.
  std::string encoding;
};

class DatasetWriter {
 public:
  explicit DatasetWriter(const std::string& path);
  ~DatasetWriter();  // removes the temporary file unless committed
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  void begin_split(const SplitSpec& spec);
  // Appends `count` samples (stored dtype, row-major) and their labels to the
  // current split. Labels are checked against [0, num_classes).
  void append(const void* x, const std::int32_t* y, std::size_t count);
  // The same for an encoded split: one byte string per sample.
  void append_encoded(const std::vector<std::vector<std::uint8_t>>& x, const std::int32_t* y,
                      std::size_t count);
  // Checks that exactly spec.n samples were appended (at least one, and at
  // most spec.n, with may_end_short).
  void end_split();
  // Closes the file and renames it to the final path.
  void commit();

  // Rows per chunk for a sample of `row_bytes`: about 32 KiB per chunk, so a
  // random batch reads little beyond the samples it wants.
  static std::size_t chunk_rows(std::size_t row_bytes, std::size_t n);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ringtrain
