// NumPy's .npy format (version 1.0) for float32 arrays: a file that
// numpy.load() reads with its shape and dtype, so a dumped sample is looked at
// without knowing how it was laid out.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringtrain {

// The .npy header of a C-order little-endian float32 array of `shape`: magic,
// version, length and the dictionary, padded to a multiple of 64 bytes.
std::string npy_header(const std::vector<std::size_t>& shape);

// Writes `data` (the product of `shape` floats) to `path` as .npy. Throws
// Error naming `path` and the system's reason.
void write_npy(const std::string& path, const float* data, const std::vector<std::size_t>& shape);

}  // namespace ringtrain
