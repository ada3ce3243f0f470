#include "ringtrain/model/safetensors.h"

#include <nlohmann/json.hpp>

#include <unistd.h>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

std::size_t dtype_bytes(const std::string& d) {
  static const std::map<std::string, std::size_t> sizes = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"I64", 8},
      {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U8", 1},   {"BOOL", 1}};
  const auto it = sizes.find(d);
  return it == sizes.end() ? 0 : it->second;
}

float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  std::uint32_t bits = 0;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      std::uint32_t m = mant;
      do {
        ++e;
        m <<= 1;
      } while ((m & 0x400) == 0);
      bits = sign | static_cast<std::uint32_t>(127 - 15 - e) << 23 | (m & 0x3ff) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float decode(const unsigned char* p, const std::string& dtype) {
  if (dtype == "F32") {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  if (dtype == "F64") {
    double d;
    std::memcpy(&d, p, 8);
    return static_cast<float>(d);
  }
  std::uint16_t h;
  std::memcpy(&h, p, 2);
  if (dtype == "F16") return half_to_float(h);
  const std::uint32_t bits = static_cast<std::uint32_t>(h) << 16;  // BF16
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace

std::vector<NamedTensor> read_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  RT_CHECK(in.good(), "safetensors file '{}' cannot be read: {}", path, std::strerror(errno));
  const auto file_size = std::filesystem::file_size(path);
  unsigned char len_bytes[8];
  RT_CHECK(file_size >= 8 && in.read(reinterpret_cast<char*>(len_bytes), 8).good(),
           "safetensors file '{}': shorter than its 8-byte header length", path);
  std::uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
  RT_CHECK(header_len > 0 && header_len <= file_size - 8 && header_len < (std::uint64_t{1} << 27),
           "safetensors file '{}': header length {} does not fit the file of {} bytes", path,
           header_len, file_size);
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(header);
  } catch (const std::exception& e) {
    RT_CHECK(false, "safetensors file '{}': the header is not JSON ({})", path, e.what());
  }
  RT_CHECK(j.is_object(), "safetensors file '{}': the header is not a JSON object", path);
  const std::uint64_t data_size = file_size - 8 - header_len;
  std::vector<unsigned char> data(data_size);
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(data_size));
  RT_CHECK(in.good() || data_size == 0, "safetensors file '{}': the data cannot be read", path);
  std::vector<std::pair<std::uint64_t, NamedTensor>> tensors;
  for (const auto& [name, t] : j.items()) {
    if (name == "__metadata__") continue;
    try {
      NamedTensor out;
      out.name = name;
      out.dtype = t.at("dtype").get<std::string>();
      out.shape = t.at("shape").get<std::vector<std::size_t>>();
      const auto range = t.at("data_offsets").get<std::vector<std::uint64_t>>();
      const std::size_t bytes = dtype_bytes(out.dtype);
      RT_CHECK(bytes > 0, "unknown dtype '{}'", out.dtype);
      std::size_t n = 1;
      for (std::size_t d : out.shape) n *= d;
      RT_CHECK(range.size() == 2 && range[0] <= range[1] && range[1] <= data_size,
               "data_offsets outside the {} bytes of data", data_size);
      RT_CHECK(range[1] - range[0] == n * bytes, "{} bytes for {} elements of {}",
               range[1] - range[0], n, out.dtype);
      if (out.dtype == "F32" || out.dtype == "F64" || out.dtype == "F16" || out.dtype == "BF16") {
        out.data.resize(n);
        for (std::size_t i = 0; i < n; ++i)
          out.data[i] = decode(data.data() + range[0] + i * bytes, out.dtype);
      }
      tensors.emplace_back(range[0], std::move(out));
    } catch (const Error& e) {
      RT_CHECK(false, "safetensors file '{}': tensor '{}': {}", path, name, e.what());
    } catch (const std::exception& e) {
      RT_CHECK(false, "safetensors file '{}': tensor '{}': bad header entry ({})", path, name,
               e.what());
    }
  }
  // The header is a JSON object (unordered): the data order is the file's order.
  std::stable_sort(tensors.begin(), tensors.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<NamedTensor> out;
  for (auto& [_, t] : tensors) out.push_back(std::move(t));
  return out;
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::vector<std::pair<std::string, std::int64_t>>& counters) {
  nlohmann::ordered_json j;
  j["__metadata__"] = {{"format", "pt"}, {"writer", "ringtrain"}};
  std::uint64_t offset = 0;
  for (const NamedTensor& t : tensors) {
    j[t.name] = {{"dtype", "F32"},
                 {"shape", t.shape},
                 {"data_offsets", {offset, offset + 4 * t.data.size()}}};
    offset += 4 * t.data.size();
  }
  for (const auto& [name, _] : counters) {
    j[name] = {{"dtype", "I64"},
               {"shape", nlohmann::json::array()},
               {"data_offsets", {offset, offset + 8}}};
    offset += 8;
  }
  std::string header = j.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // data aligned to 8 bytes
  const std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    RT_CHECK(out.good(), "cannot write '{}': {}", tmp, std::strerror(errno));
    unsigned char len[8];
    std::uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
    out.write(reinterpret_cast<const char*>(len), 8);
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    for (const NamedTensor& t : tensors)
      out.write(reinterpret_cast<const char*>(t.data.data()),
                static_cast<std::streamsize>(4 * t.data.size()));
    for (const auto& [_, v] : counters) out.write(reinterpret_cast<const char*>(&v), 8);
    out.flush();
    if (!out.good()) {
      std::remove(tmp.c_str());
      RT_CHECK(false, "cannot write '{}': {}", tmp, std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    RT_CHECK(false, "cannot rename '{}' to '{}': {}", tmp, path, std::strerror(err));
  }
}

}  // namespace ringtrain
