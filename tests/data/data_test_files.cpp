#include "tests/data/data_test_files.h"

#include <hdf5.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <stdexcept>

namespace ringtrain::test {
namespace {

void must(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("test fixture: ") + what);
}

struct RawSplit {
  std::string name = "train";
  hid_t x_type = H5T_STD_U8LE;
  std::vector<hsize_t> x_dims;
  const void* x_data = nullptr;
  hid_t x_mem = H5T_NATIVE_UINT8;
  std::vector<std::int32_t> y;
  bool write_x = true, write_y = true, write_num_classes = true;
  int classes = 10;
};

void write_raw(hid_t file, const RawSplit& s) {
  hid_t g = H5Gcreate2(file, s.name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  must(g >= 0, "group");
  auto attr_num = [&](const char* name, hid_t type, hid_t mem, const void* v) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(g, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
    must(H5Awrite(a, mem, v) >= 0, name);
    H5Aclose(a);
    H5Sclose(sp);
  };
  if (s.write_num_classes) {
    const long long c = s.classes;
    attr_num("num_classes", H5T_STD_I64LE, H5T_NATIVE_LLONG, &c);
  }
  const float scale = 1.0f / 255.0f, offset = -0.5f;
  attr_num("scale", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &scale);
  attr_num("offset", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &offset);
  if (s.write_x) {
    hid_t sp = H5Screate_simple(static_cast<int>(s.x_dims.size()), s.x_dims.data(), nullptr);
    hid_t d = H5Dcreate2(g, "x", s.x_type, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    // (An empty split has nothing to write.)
    if (!s.x_dims.empty() && s.x_dims[0] > 0)
      must(H5Dwrite(d, s.x_mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.x_data) >= 0, "x");
    H5Dclose(d);
    H5Sclose(sp);
  }
  if (!s.write_y) {
    H5Gclose(g);
    return;
  }
  const hsize_t ny = s.y.size();
  hid_t sp = H5Screate_simple(1, &ny, nullptr);
  hid_t d = H5Dcreate2(g, "y", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  if (ny > 0)
    must(H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.y.data()) >= 0, "y");
  H5Dclose(d);
  H5Sclose(sp);
  H5Gclose(g);
}

std::vector<std::uint8_t> good_bytes(std::size_t n, std::size_t elems) {
  std::vector<std::uint8_t> x(n * elems);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t e = 0; e < elems; ++e) x[i * elems + e] = sample_byte(i, e);
  return x;
}

std::vector<std::int32_t> good_labels(std::size_t n, int classes) {
  std::vector<std::int32_t> y(n);
  for (std::size_t i = 0; i < n; ++i) y[i] = sample_label(i, classes);
  return y;
}

}  // namespace

void write_good_dataset(const std::string& path, std::size_t n, std::size_t n_test,
                        const std::vector<std::size_t>& shape, int classes) {
  std::size_t elems = 1;
  for (std::size_t s : shape) elems *= s;
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  must(f >= 0, "create");
  for (const auto& [name, count] :
       {std::pair<const char*, std::size_t>{"train", n}, {"test", n_test}}) {
    RawSplit s;
    s.name = name;
    s.classes = classes;
    s.x_dims = {count};
    for (std::size_t d : shape) s.x_dims.push_back(d);
    const auto x = good_bytes(count, elems);
    s.x_data = x.data();
    s.y = good_labels(count, classes);
    write_raw(f, s);
  }
  H5Fclose(f);
}

void write_broken_dataset(const std::string& path, Breakage b) {
  const std::size_t n = 40, elems = 12;
  if (b == Breakage::not_hdf5) {
    FILE* f = std::fopen(path.c_str(), "wb");
    must(f != nullptr, "open");
    for (int i = 0; i < 4096; ++i) std::fputc((i * 37 + 11) & 0xFF, f);
    std::fclose(f);
    return;
  }
  if (b == Breakage::truncated) {
    write_good_dataset(path, 2000, 100, {1, 8, 8}, 10);
    const auto size = std::filesystem::file_size(path);
    std::filesystem::resize_file(path, size / 2);
    return;
  }
  hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  must(f >= 0, "create");
  RawSplit s;
  s.x_dims = {n, 3, 4};
  const auto x = good_bytes(n, elems);
  s.x_data = x.data();
  s.y = good_labels(n, s.classes);
  std::vector<std::int16_t> x16(n * elems, 5);
  std::vector<float> xf(n * elems);
  for (std::size_t i = 0; i < xf.size(); ++i) xf[i] = static_cast<float>(x[i]) / 255.0f;
  switch (b) {
    case Breakage::no_split:
      s.name = "test";
      break;
    case Breakage::no_x:
      s.write_x = false;
      break;
    case Breakage::xy_mismatch:
      s.y.pop_back();
      break;
    case Breakage::label_range:
      s.y[17] = s.classes;
      break;
    case Breakage::bad_dtype:
      s.x_type = H5T_STD_I16LE;
      s.x_mem = H5T_NATIVE_INT16;
      s.x_data = x16.data();
      break;
    case Breakage::no_num_classes:
      s.write_num_classes = false;
      break;
    case Breakage::nonfinite:
      xf[7 * elems + 5] = std::numeric_limits<float>::quiet_NaN();
      xf[30 * elems] = std::numeric_limits<float>::infinity();
      s.x_type = H5T_IEEE_F32LE;
      s.x_mem = H5T_NATIVE_FLOAT;
      s.x_data = xf.data();
      break;
    case Breakage::no_test_labels: {
      RawSplit unlabelled = s;
      unlabelled.name = "test";
      unlabelled.write_y = false;
      write_raw(f, unlabelled);
      break;
    }
    case Breakage::empty_test: {
      RawSplit empty = s;
      empty.name = "test";
      empty.x_dims[0] = 0;
      empty.y.clear();
      write_raw(f, empty);
      break;
    }
    default:
      break;
  }
  write_raw(f, s);
  H5Fclose(f);
}

void write_all_fixtures(const std::string& dir) {
  std::filesystem::create_directories(dir);
  write_good_dataset(dir + "/good.h5", 103, 17, {1, 4, 4}, 10);
  const std::pair<const char*, Breakage> all[] = {{"no_split", Breakage::no_split},
                                                  {"no_x", Breakage::no_x},
                                                  {"xy_mismatch", Breakage::xy_mismatch},
                                                  {"label_range", Breakage::label_range},
                                                  {"bad_dtype", Breakage::bad_dtype},
                                                  {"truncated", Breakage::truncated},
                                                  {"not_hdf5", Breakage::not_hdf5},
                                                  {"no_num_classes", Breakage::no_num_classes},
                                                  {"nonfinite", Breakage::nonfinite},
                                                  {"empty_test", Breakage::empty_test},
                                                  {"no_test_labels", Breakage::no_test_labels}};
  for (const auto& [name, b] : all) write_broken_dataset(dir + "/" + name + ".h5", b);
}

}  // namespace ringtrain::test
