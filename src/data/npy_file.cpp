#include "ringtrain/data/npy_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

std::string npy_header(const std::vector<std::size_t>& shape) {
  // Python's tuple syntax: (3,) for one dimension, () for a scalar.
  std::string dims;
  for (std::size_t d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  if (shape.size() == 1) dims.resize(dims.size() - 1);
  std::string dict =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
  // magic (6) + version (2) + header length (2) + dict + '\n', a multiple of 64.
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string header("\x93NUMPY\x01\x00", 8);
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>((dict.size() >> 8) & 0xff);
  return header + dict;
}

void write_npy(const std::string& path, const float* data, const std::vector<std::size_t>& shape) {
  static_assert(sizeof(float) == 4, "'<f4' is 4 bytes");
  std::size_t count = 1;
  for (std::size_t d : shape) count *= d;
  const std::string header = npy_header(shape);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
  RT_CHECK(f != nullptr, "cannot create {}: {}", path, std::strerror(errno));
  // The data as the host holds it: '<f4' says little-endian, which is every
  // machine ringtrain builds for.
  const bool ok = std::fwrite(header.data(), 1, header.size(), f.get()) == header.size() &&
                  std::fwrite(data, sizeof(float), count, f.get()) == count &&
                  std::fflush(f.get()) == 0;
  RT_CHECK(ok, "write error on {}: {}", path, std::strerror(errno));
}

}  // namespace ringtrain
