// IDX files (the MNIST and Fashion-MNIST format), plain or gzipped: a magic
// 0x00 0x00 <type> <ndims>, ndims big-endian uint32 sizes, then the data,
// big-endian, row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain {

enum class IdxType : std::uint8_t {
  u8 = 0x08,
  i8 = 0x09,
  i16 = 0x0B,
  i32 = 0x0C,
  f32 = 0x0D,
  f64 = 0x0E
};
std::size_t idx_type_size(IdxType t);

struct IdxArray {
  IdxType type = IdxType::u8;
  std::vector<std::size_t> dims;
  std::vector<unsigned char> data;  // native byte order, row-major
  std::size_t count() const;        // product of dims
};

// Reads a file gzipped or not (zlib reads both). Throws Error naming the file
// on a bad magic, an unknown type, or a length that does not match the header.
IdxArray read_idx(const std::string& path);
// Writes `a` (gzipped when `gzip`); for tests and tools.
void write_idx(const std::string& path, const IdxArray& a, bool gzip);

}  // namespace ringtrain
