// safetensors, the common weights interchange format: an 8-byte little-endian
// header length, a JSON header naming each tensor's dtype, shape and byte
// range, then the raw little-endian data. ringtrain reads F32, F16, BF16 and
// F64 (widened or narrowed to f32) and the integer counters it ignores
// (BatchNorm's num_batches_tracked); it writes F32, and I64 for those counters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain {

struct NamedTensor {
  std::string name;
  std::vector<std::size_t> shape;
  std::vector<float> data;  // empty for a tensor of an integer dtype
  std::string dtype;        // as stored: "F32", "BF16", "I64", ...
};

// Every tensor of the file, in header order. Error naming the file and what
// is wrong (missing or truncated file, bad header, ranges outside the data).
std::vector<NamedTensor> read_safetensors(const std::string& path);

// Writes `tensors` (f32) and `counters` (I64 scalars) to `path` through a
// temporary name and a rename, so no half-written file is left.
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::vector<std::pair<std::string, std::int64_t>>& counters = {});

}  // namespace ringtrain
