#include "ringtrain/data/idx_file.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "ringtrain/core/check.h"

namespace ringtrain {

std::size_t idx_type_size(IdxType t) {
  switch (t) {
    case IdxType::u8:
    case IdxType::i8:
      return 1;
    case IdxType::i16:
      return 2;
    case IdxType::i32:
    case IdxType::f32:
      return 4;
    case IdxType::f64:
      return 8;
  }
  return 0;
}

std::size_t IdxArray::count() const {
  std::size_t c = 1;
  for (std::size_t d : dims) c *= d;
  return c;
}

namespace {
struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<gzFile_s, GzCloser>;

// Big-endian <-> native for elements of `size` bytes.
void swap_elements(unsigned char* p, std::size_t count, std::size_t size) {
  if (size == 1) return;
  for (std::size_t i = 0; i < count; ++i) std::reverse(p + i * size, p + (i + 1) * size);
}

bool valid_type(unsigned t) {
  return t == 0x08 || t == 0x09 || t == 0x0B || t == 0x0C || t == 0x0D || t == 0x0E;
}

// gzread takes an unsigned count: read large payloads in pieces.
std::size_t read_fully(gzFile_s* f, unsigned char* out, std::size_t bytes,
                       const std::string& path) {
  std::size_t done = 0;
  while (done < bytes) {
    const unsigned piece = static_cast<unsigned>(std::min<std::size_t>(bytes - done, 1u << 30));
    const int got = gzread(f, out + done, piece);
    if (got < 0) {
      int errnum = 0;
      const char* msg = gzerror(f, &errnum);
      RT_CHECK(false, "IDX file {}: read error after {} bytes: {} (corrupt gzip data?)", path, done,
               msg);
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}
}  // namespace

IdxArray read_idx(const std::string& path) {
  std::error_code ec;
  RT_CHECK(std::filesystem::exists(path, ec), "IDX file {} does not exist", path);
  GzFile f(gzopen(path.c_str(), "rb"));
  RT_CHECK(f != nullptr, "IDX file {}: cannot open", path);
  gzbuffer(f.get(), 1u << 20);
  unsigned char magic[4] = {};
  RT_CHECK(read_fully(f.get(), magic, 4, path) == 4, "IDX file {}: shorter than the 4-byte magic",
           path);
  RT_CHECK(
      magic[0] == 0 && magic[1] == 0 && valid_type(magic[2]) && magic[3] >= 1,
      "IDX file {}: bad magic {:02x} {:02x} {:02x} {:02x} (expected 00 00 <type 08..0e> <ndims>)",
      path, magic[0], magic[1], magic[2], magic[3]);
  IdxArray a;
  a.type = static_cast<IdxType>(magic[2]);
  for (unsigned d = 0; d < magic[3]; ++d) {
    unsigned char b[4];
    RT_CHECK(read_fully(f.get(), b, 4, path) == 4, "IDX file {}: truncated header (dimension {})",
             path, d);
    a.dims.push_back((std::size_t{b[0]} << 24) | (std::size_t{b[1]} << 16) |
                     (std::size_t{b[2]} << 8) | b[3]);
  }
  const std::size_t esize = idx_type_size(a.type);
  const std::size_t bytes = a.count() * esize;
  a.data.resize(bytes);
  const std::size_t got = read_fully(f.get(), a.data.data(), bytes, path);
  RT_CHECK(got == bytes,
           "IDX file {}: truncated: the header promises {} bytes of data, the file has {}", path,
           bytes, got);
  unsigned char extra = 0;
  RT_CHECK(read_fully(f.get(), &extra, 1, path) == 0,
           "IDX file {}: longer than its header says ({} bytes of data): wrong or damaged file",
           path, bytes);
  swap_elements(a.data.data(), a.count(), esize);
  return a;
}

void write_idx(const std::string& path, const IdxArray& a, bool gzip) {
  const std::size_t esize = idx_type_size(a.type);
  RT_CHECK(a.data.size() == a.count() * esize,
           "write_idx {}: {} bytes of data for dims of {} elements", path, a.data.size(),
           a.count());
  std::vector<unsigned char> out = {0, 0, static_cast<unsigned char>(a.type),
                                    static_cast<unsigned char>(a.dims.size())};
  for (std::size_t d : a.dims)
    for (int shift = 24; shift >= 0; shift -= 8)
      out.push_back(static_cast<unsigned char>((d >> shift) & 0xFF));
  const std::size_t header = out.size();
  out.insert(out.end(), a.data.begin(), a.data.end());
  swap_elements(out.data() + header, a.count(), esize);
  if (gzip) {
    GzFile f(gzopen(path.c_str(), "wb"));
    RT_CHECK(f != nullptr, "cannot create {}", path);
    std::size_t done = 0;
    while (done < out.size()) {
      const unsigned piece =
          static_cast<unsigned>(std::min<std::size_t>(out.size() - done, 1u << 30));
      RT_CHECK(gzwrite(f.get(), out.data() + done, piece) == static_cast<int>(piece),
               "write error on {}", path);
      done += piece;
    }
  } else {
    std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path.c_str(), "wb"), std::fclose);
    RT_CHECK(f != nullptr, "cannot create {}", path);
    RT_CHECK(std::fwrite(out.data(), 1, out.size(), f.get()) == out.size(), "write error on {}",
             path);
  }
}

}  // namespace ringtrain
