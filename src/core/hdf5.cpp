#include "core/hdf5.h"

#include "ringtrain/core/check.h"

namespace ringtrain::detail {

namespace {
herr_t keep_innermost(unsigned n, const H5E_error2_t* err, void* out) {
  // Walking upward starts at the innermost frame, where the error was
  // detected: the most specific description ("truncated file", "bad symbol
  // table" ...) rather than the API's generic "unable to open file".
  auto* text = static_cast<std::string*>(out);
  if (n == 0 && err->desc) *text = err->desc;
  return 0;
}
// A failed read or write of HDF5's file driver describes itself as "file write
// failed: time = ..., filename = ..., file descriptor = 5, errno = 28, error
// message = 'No space left on device', buf = ..., offset = ...": a user needs
// the first words and the system's reason ("file write failed: No space left
// on device").
std::string system_reason(const std::string& desc) {
  const std::string key = "error message = '";
  const std::size_t at = desc.find(key);
  if (at == std::string::npos) return desc;
  const std::size_t begin = at + key.size(), end = desc.find('\'', begin);
  if (end == std::string::npos) return desc;
  const std::size_t colon = desc.find(':');
  const std::string what = colon < at ? desc.substr(0, colon) : std::string("file I/O failed");
  return what + ": " + desc.substr(begin, end - begin);
}
}  // namespace

std::string hdf5_error_string() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? std::string("HDF5 call failed") : system_reason(text);
}

}  // namespace ringtrain::detail

namespace ringtrain::h5 {

std::recursive_mutex& library_mutex() {
  static std::recursive_mutex m;
  return m;
}

void quiet_errors() {
  static std::once_flag once;
  std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

bool link_exists(hid_t loc, const std::string& name) {
  return H5Lexists(loc, name.c_str(), H5P_DEFAULT) > 0;
}

namespace {
herr_t collect_group(hid_t loc, const char* name, const H5L_info_t*, void* out) {
  H5O_info_t info{};
  if (H5Oget_info_by_name(loc, name, &info, H5P_DEFAULT) >= 0 && info.type == H5O_TYPE_GROUP)
    static_cast<std::vector<std::string>*>(out)->push_back(name);
  return 0;
}
}  // namespace

std::vector<std::string> child_groups(hid_t loc) {
  std::vector<std::string> names;
  H5Literate(loc, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_group, &names);
  H5Eclear2(H5E_DEFAULT);
  return names;
}

bool has_attr(hid_t obj, const std::string& name) {
  return H5Aexists(obj, name.c_str()) > 0;
}

std::optional<double> read_attr_number(hid_t obj, const std::string& name,
                                       const std::string& what) {
  if (!has_attr(obj, name)) return std::nullopt;
  Attr attr(RT_H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT), what + " attribute " + name));
  Type type(RT_H5_CHECK(H5Aget_type(attr.get()), what + " attribute " + name));
  const H5T_class_t cls = H5Tget_class(type.get());
  RT_CHECK(cls == H5T_INTEGER || cls == H5T_FLOAT,
           "{}: attribute '{}' must be a number (integer or float)", what, name);
  Space space(RT_H5_CHECK(H5Aget_space(attr.get()), what + " attribute " + name));
  RT_CHECK(H5Sget_simple_extent_npoints(space.get()) == 1,
           "{}: attribute '{}' must be a single number", what, name);
  double value = 0;
  RT_H5_CHECK(H5Aread(attr.get(), H5T_NATIVE_DOUBLE, &value), what + " attribute " + name);
  return value;
}

std::optional<std::vector<std::string>> read_attr_strings(hid_t obj, const std::string& name,
                                                          const std::string& what) {
  if (!has_attr(obj, name)) return std::nullopt;
  const std::string where = what + " attribute " + name;
  Attr attr(RT_H5_CHECK(H5Aopen(obj, name.c_str(), H5P_DEFAULT), where));
  Type type(RT_H5_CHECK(H5Aget_type(attr.get()), where));
  RT_CHECK(H5Tget_class(type.get()) == H5T_STRING, "{}: attribute '{}' must hold strings", what,
           name);
  Space space(RT_H5_CHECK(H5Aget_space(attr.get()), where));
  const auto n = static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.get()));
  std::vector<std::string> out;
  out.reserve(n);
  if (H5Tis_variable_str(type.get()) > 0) {
    Type mem(H5Tcopy(H5T_C_S1));
    H5Tset_size(mem.get(), H5T_VARIABLE);
    H5Tset_cset(mem.get(), H5Tget_cset(type.get()));  // HDF5 does not convert ASCII <-> UTF-8
    std::vector<char*> ptrs(n, nullptr);
    RT_H5_CHECK(H5Aread(attr.get(), mem.get(), ptrs.data()), where);
    for (char* p : ptrs) out.emplace_back(p ? p : "");
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, ptrs.data());
  } else {
    const std::size_t len = H5Tget_size(type.get());
    std::vector<char> buf(n * len);
    RT_H5_CHECK(H5Aread(attr.get(), type.get(), buf.data()), where);
    for (std::size_t i = 0; i < n; ++i) {
      std::string s(buf.data() + i * len, len);
      s.resize(s.find('\0') == std::string::npos ? s.size() : s.find('\0'));
      out.push_back(std::move(s));
    }
  }
  return out;
}

namespace {
void write_scalar_attr(hid_t obj, const std::string& name, hid_t file_type, hid_t mem_type,
                       const void* value, const std::string& what) {
  const std::string where = what + " attribute " + name;
  Space space(RT_H5_CHECK(H5Screate(H5S_SCALAR), where));
  Attr attr(RT_H5_CHECK(
      H5Acreate2(obj, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), where));
  RT_H5_CHECK(H5Awrite(attr.get(), mem_type, value), where);
}
}  // namespace

void write_attr_int(hid_t obj, const std::string& name, long long value, const std::string& what) {
  write_scalar_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_LLONG, &value, what);
}

void write_attr_float(hid_t obj, const std::string& name, float value, const std::string& what) {
  write_scalar_attr(obj, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, &value, what);
}

void write_attr_strings(hid_t obj, const std::string& name, const std::vector<std::string>& values,
                        const std::string& what) {
  const std::string where = what + " attribute " + name;
  Type type(H5Tcopy(H5T_C_S1));
  H5Tset_size(type.get(), H5T_VARIABLE);
  H5Tset_cset(type.get(), H5T_CSET_UTF8);
  const hsize_t n = values.size();
  Space space(RT_H5_CHECK(H5Screate_simple(1, &n, nullptr), where));
  Attr attr(RT_H5_CHECK(
      H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), where));
  std::vector<const char*> ptrs;
  for (const auto& v : values) ptrs.push_back(v.c_str());
  RT_H5_CHECK(H5Awrite(attr.get(), type.get(), ptrs.data()), where);
}

std::vector<hsize_t> dims_of(hid_t dataset) {
  Space space(H5Dget_space(dataset));
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<std::size_t>(rank > 0 ? rank : 0));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

}  // namespace ringtrain::h5
