// HDF5 checkpoints: layout and crash-safety rules are in
// include/ringtrain/train/checkpoint.h.
#include "ringtrain/train/checkpoint.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>

#include "core/hdf5.h"
#include "ringtrain/config.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/tensor/shape.h"

namespace ringtrain {

namespace fs = std::filesystem;

namespace {

constexpr const char* kParamsGroup = "params";
constexpr const char* kOptimizerGroup = "optimizer";
// Non-trainable state (BatchNorm's running statistics); absent in checkpoints
// of models without any, and in those written before it existed.
constexpr const char* kBuffersGroup = "buffers";
constexpr const char* kTempMarker = ".tmp-";
// Chunks carry the Fletcher-32 checksum; capping them keeps the filter's
// working copy small for very large tensors.
constexpr std::size_t kMaxChunkBytes = std::size_t{64} << 20;

// ---------------------------------------------------------------------------
// File names.
// ---------------------------------------------------------------------------

// Parses "ckpt-<digits>.h5" exactly; anything else (temporaries, other files)
// is not a checkpoint.
std::optional<std::uint64_t> parse_checkpoint_name(const std::string& name) {
  constexpr std::string_view prefix = "ckpt-";
  constexpr std::string_view suffix = ".h5";
  if (name.size() <= prefix.size() + suffix.size()) return std::nullopt;
  if (name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) return std::nullopt;
  const char* first = name.data() + prefix.size();
  const char* last = name.data() + name.size() - suffix.size();
  if (!std::all_of(first, last, [](char c) { return c >= '0' && c <= '9'; })) return std::nullopt;
  std::uint64_t step = 0;
  auto [ptr, ec] = std::from_chars(first, last, step);
  if (ec != std::errc() || ptr != last) return std::nullopt;  // overflow
  return step;
}

bool is_temporary_name(const std::string& name) {
  return name.rfind("ckpt-", 0) == 0 &&
         name.find(std::string(".h5") + kTempMarker) != std::string::npos;
}

// ---------------------------------------------------------------------------
// Durability.
// ---------------------------------------------------------------------------

void fsync_path(const std::string& path, bool directory) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (directory ? O_DIRECTORY : 0));
  RT_CHECK(fd >= 0, "checkpoint: cannot open {} to fsync it: {}", path, std::strerror(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems cannot fsync a directory (EINVAL); the rename is then as
  // durable as that file system makes it, which is all we can ask for.
  if (rc != 0 && directory && (err == EINVAL || err == ENOTSUP)) return;
  RT_CHECK(rc == 0, "checkpoint: fsync of {} failed: {}", path, std::strerror(err));
}

// ---------------------------------------------------------------------------
// Writing.
// ---------------------------------------------------------------------------

void check_records(const std::vector<TensorRecord>& records, const char* group,
                   const std::string& path) {
  std::set<std::string> seen;
  for (const TensorRecord& r : records) {
    RT_CHECK(!r.name.empty(), "checkpoint {}: a tensor in group '{}' has an empty name", path,
             group);
    RT_CHECK(r.name.find('/') == std::string::npos && r.name != "." && r.name != "..",
             "checkpoint {}: tensor name '{}' in group '{}' is not a valid dataset name", path,
             r.name, group);
    RT_CHECK(seen.insert(r.name).second, "checkpoint {}: tensor '{}' appears twice in group '{}'",
             path, r.name, group);
    RT_CHECK(Shape(r.shape).numel() == r.count,
             "checkpoint {}: tensor '{}/{}' has shape {} ({} elements) but count {}", path, group,
             r.name, Shape(r.shape).to_string(), Shape(r.shape).numel(), r.count);
    RT_CHECK(r.count == 0 || r.data != nullptr, "checkpoint {}: tensor '{}/{}' has no data", path,
             group, r.name);
  }
}

// A checkpoint is a state to go back to: one holding NaN or Inf is not.
void check_finite(const std::vector<TensorRecord>& records, const char* group,
                  const std::string& path) {
  for (const TensorRecord& r : records)
    for (std::size_t i = 0; i < r.count; ++i)
      RT_CHECK(std::isfinite(r.data[i]),
               "checkpoint {}: tensor '{}/{}' holds non-finite values (NaN or Inf); refusing to "
               "write it",
               path, group, r.name);
}

void write_scalar_attr(hid_t obj, const char* name, hid_t file_type, hid_t mem_type,
                       const void* value, const std::string& path) {
  const std::string what = fmt::format("checkpoint {}: attribute {}", path, name);
  h5::Space space(RT_H5_CHECK(H5Screate(H5S_SCALAR), what));
  h5::Attr attr(
      RT_H5_CHECK(H5Acreate2(obj, name, file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), what));
  RT_H5_CHECK(H5Awrite(attr.get(), mem_type, value), what);
}

void write_u64_attr(hid_t obj, const char* name, std::uint64_t v, const std::string& path) {
  write_scalar_attr(obj, name, H5T_STD_U64LE, H5T_NATIVE_UINT64, &v, path);
}

void write_u64_array_attr(hid_t obj, const char* name, const std::vector<std::uint64_t>& v,
                          const std::string& path) {
  const std::string what = fmt::format("checkpoint {}: attribute {}", path, name);
  const hsize_t dims[1] = {v.size()};
  // An empty array is a null dataspace: HDF5 has no zero-length attribute.
  h5::Space space(
      RT_H5_CHECK(v.empty() ? H5Screate(H5S_NULL) : H5Screate_simple(1, dims, nullptr), what));
  h5::Attr attr(RT_H5_CHECK(
      H5Acreate2(obj, name, H5T_STD_U64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT), what));
  if (!v.empty()) RT_H5_CHECK(H5Awrite(attr.get(), H5T_NATIVE_UINT64, v.data()), what);
}

h5::Type utf8_string_type(const std::string& what) {
  h5::Type type(RT_H5_CHECK(H5Tcopy(H5T_C_S1), what));
  RT_H5_CHECK(H5Tset_size(type.get(), H5T_VARIABLE), what);
  RT_H5_CHECK(H5Tset_cset(type.get(), H5T_CSET_UTF8), what);
  return type;
}

void write_string_attr(hid_t obj, const char* name, const std::string& value,
                       const std::string& path) {
  // Variable-length strings live in the global heap, so a long config does not
  // hit the 64 KiB limit of an object header.
  const std::string what = fmt::format("checkpoint {}: attribute {}", path, name);
  h5::Type type = utf8_string_type(what);
  const char* cstr = value.c_str();
  write_scalar_attr(obj, name, type.get(), type.get(), &cstr, path);
}

h5::Group create_ordered_group(hid_t file, const char* name, const std::string& path) {
  const std::string what = fmt::format("checkpoint {}: group {}", path, name);
  h5::PropList gcpl(RT_H5_CHECK(H5Pcreate(H5P_GROUP_CREATE), what));
  RT_H5_CHECK(H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
              what);
  return h5::Group(RT_H5_CHECK(H5Gcreate2(file, name, H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), what));
}

void write_tensor(hid_t group, const char* group_name, const TensorRecord& r,
                  const std::string& path) {
  const std::string what = fmt::format("checkpoint {}: dataset /{}/{}", path, group_name, r.name);
  std::vector<hsize_t> dims(r.shape.begin(), r.shape.end());
  h5::Space space(RT_H5_CHECK(
      dims.empty() ? H5Screate(H5S_SCALAR)
                   : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
      what));
  h5::PropList dcpl(RT_H5_CHECK(H5Pcreate(H5P_DATASET_CREATE), what));
  if (!dims.empty() && r.count > 0) {
    // Chunk = the whole tensor, split along leading dimensions if it is larger
    // than kMaxChunkBytes; each chunk gets a checksum.
    std::vector<hsize_t> chunk = dims;
    std::size_t elems = r.count;
    for (std::size_t i = 0; i < chunk.size() && elems * sizeof(float) > kMaxChunkBytes; ++i) {
      const std::size_t rest = elems / chunk[i];
      chunk[i] = std::max<std::size_t>(1, kMaxChunkBytes / sizeof(float) / rest);
      elems = rest * chunk[i];
    }
    RT_H5_CHECK(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), what);
    RT_H5_CHECK(H5Pset_fletcher32(dcpl.get()), what);
  }
  h5::DataSet dset(RT_H5_CHECK(H5Dcreate2(group, r.name.c_str(), H5T_IEEE_F32LE, space.get(),
                                          H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                               what));
  if (r.count > 0)
    RT_H5_CHECK(H5Dwrite(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, r.data),
                what);
}

void write_file(const std::string& tmp_path, const std::string& final_path,
                const CheckpointMeta& meta, const std::vector<TensorRecord>& params,
                const std::vector<TensorRecord>& optimizer,
                const std::vector<TensorRecord>& buffers) {
  const std::string& p = final_path;  // errors name the checkpoint being written
  h5::PropList fapl(RT_H5_CHECK(H5Pcreate(H5P_FILE_ACCESS), "checkpoint " + p));
  // 1.8 object format: creation-order-indexed groups, readable by HDF5 >= 1.8.
  RT_H5_CHECK(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST),
              "checkpoint " + p);
  h5::File file(RT_H5_CHECK(H5Fcreate(tmp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()),
                            fmt::format("checkpoint {}: cannot create {}", p, tmp_path)));
  {
    h5::Group root(RT_H5_CHECK(H5Gopen2(file.get(), "/", H5P_DEFAULT), "checkpoint " + p));
    const hid_t g = root.get();
    const std::uint32_t version = kCheckpointFormatVersion;
    write_scalar_attr(g, "format_version", H5T_STD_U32LE, H5T_NATIVE_UINT32, &version, p);
    write_u64_attr(g, "step", meta.step, p);
    write_u64_attr(g, "epoch", meta.epoch, p);
    write_u64_attr(g, "epoch_step", meta.epoch_step, p);
    write_u64_attr(g, "global_batch", meta.global_batch, p);
    const std::int32_t world = meta.world_size;
    write_scalar_attr(g, "world_size", H5T_STD_I32LE, H5T_NATIVE_INT32, &world, p);
    write_u64_array_attr(g, "rng_state", meta.rng_state, p);
    write_string_attr(g, "model_spec", meta.model_spec, p);
    write_u64_attr(g, "model_hash", meta.model_hash, p);
    write_string_attr(g, "config", meta.config_json, p);
    const std::uint8_t finished = meta.finished ? 1 : 0;
    write_scalar_attr(g, "finished", H5T_STD_U8LE, H5T_NATIVE_UINT8, &finished, p);
    write_string_attr(g, "writer", RINGTRAIN_VERSION_STRING, p);

    h5::Group params_group = create_ordered_group(file.get(), kParamsGroup, p);
    for (const TensorRecord& r : params) write_tensor(params_group.get(), kParamsGroup, r, p);
    h5::Group opt_group = create_ordered_group(file.get(), kOptimizerGroup, p);
    for (const TensorRecord& r : optimizer) write_tensor(opt_group.get(), kOptimizerGroup, r, p);
    if (!buffers.empty()) {
      h5::Group buffers_group = create_ordered_group(file.get(), kBuffersGroup, p);
      for (const TensorRecord& r : buffers) write_tensor(buffers_group.get(), kBuffersGroup, r, p);
    }
  }
  // Closing flushes HDF5's metadata cache: a failure here is a failed write.
  RT_H5_CHECK(file.close(), fmt::format("checkpoint {}: cannot finish writing {}", p, tmp_path));
}

// Removes stale temporaries and all but the newest `keep` checkpoints up to
// `step`, the one just written. Checkpoints of later steps (a previous run in
// the same directory, or the abandoned future of a run resumed from an older
// checkpoint) are not this run's to delete; they are named, because a later
// "resume latest" would pick them.
void prune(const std::string& dir, std::uint64_t step, std::size_t keep) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (is_temporary_name(name)) {
      log_warn("checkpoint: removing {} left by an interrupted write", entry.path().string());
      fs::remove(entry.path(), ec);
    }
  }
  std::vector<std::pair<std::uint64_t, std::string>> mine;
  std::vector<std::string> later;
  for (auto& c : list_checkpoints(dir)) {
    if (c.first <= step)
      mine.push_back(std::move(c));
    else
      later.push_back(std::move(c.second));
  }
  if (!later.empty())
    log_warn(
        "checkpoint: {} holds checkpoints of later steps than this run's step {} ({}); they are "
        "kept, "
        "and resuming from the latest checkpoint would pick them",
        dir, step, fmt::join(later, ", "));
  if (keep == 0 || mine.size() <= keep) return;
  for (std::size_t i = 0; i + keep < mine.size(); ++i) {
    fs::remove(mine[i].second, ec);
    if (ec)
      log_warn("checkpoint: cannot remove old checkpoint {}: {}", mine[i].second, ec.message());
  }
}

// ---------------------------------------------------------------------------
// Reading.
// ---------------------------------------------------------------------------

class CheckpointReader {
 public:
  explicit CheckpointReader(std::string path) : path_(std::move(path)) {}

  LoadedCheckpoint read() {
    std::error_code ec;
    RT_CHECK(fs::exists(path_, ec), "checkpoint {}: no such file", path_);
    RT_CHECK(fs::is_regular_file(path_, ec), "checkpoint {}: not a regular file", path_);
    if (::access(path_.c_str(), R_OK) != 0 && errno == EACCES)
      throw PermissionError(fmt::format(
          "checkpoint {}: permission denied (the file is there, but this user may not read it)",
          path_));
    const htri_t is_hdf5 = H5Fis_hdf5(path_.c_str());
    RT_CHECK(is_hdf5 > 0, "checkpoint {}: not an HDF5 file (corrupt, or not a checkpoint)", path_);
    const hid_t fid = H5Fopen(path_.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    RT_CHECK(fid >= 0, "checkpoint {}: cannot open, the file is corrupt or truncated ({})", path_,
             detail::hdf5_error_string());
    h5::File file(fid);

    LoadedCheckpoint out;
    out.path = path_;
    h5::Group root(RT_H5_CHECK(H5Gopen2(file.get(), "/", H5P_DEFAULT), "checkpoint " + path_));
    const hid_t g = root.get();
    // The version decides how to read the rest, so it is checked first.
    RT_CHECK(H5Aexists(g, "format_version") > 0,
             "checkpoint {}: no format_version attribute (not a ringtrain checkpoint)", path_);
    const std::uint64_t version = read_u64(g, "format_version");
    RT_CHECK(version == kCheckpointFormatVersion,
             "checkpoint {}: format version {}, this build of ringtrain reads version {}", path_,
             version, kCheckpointFormatVersion);

    CheckpointMeta& m = out.meta;
    m.step = read_u64(g, "step");
    m.epoch = read_u64(g, "epoch");
    m.epoch_step = read_u64(g, "epoch_step");
    m.global_batch = read_u64(g, "global_batch");
    m.world_size = static_cast<int>(read_i64(g, "world_size"));
    m.rng_state = read_u64_array(g, "rng_state");
    m.model_spec = read_string(g, "model_spec");
    m.model_hash = read_u64(g, "model_hash");
    m.config_json = read_string(g, "config");
    m.finished = read_u64(g, "finished") != 0;

    read_group(file.get(), kParamsGroup, out.params, out.param_shapes);
    read_group(file.get(), kOptimizerGroup, out.optimizer, out.optimizer_shapes);
    if (H5Lexists(file.get(), kBuffersGroup, H5P_DEFAULT) > 0)
      read_group(file.get(), kBuffersGroup, out.buffers, out.buffer_shapes);
    return out;
  }

 private:
  h5::Attr open_attr(hid_t obj, const char* name) {
    const htri_t exists = H5Aexists(obj, name);
    RT_CHECK(exists > 0, "checkpoint {}: missing attribute '{}'", path_, name);
    return h5::Attr(RT_H5_CHECK(H5Aopen(obj, name, H5P_DEFAULT), attr_what(name)));
  }
  std::string attr_what(const char* name) const {
    return fmt::format("checkpoint {}: attribute '{}'", path_, name);
  }

  // Integers are read through HDF5's conversion into a 64-bit value, after
  // checking the stored type really is a scalar integer.
  void read_scalar_int(hid_t obj, const char* name, hid_t mem_type, void* out) {
    h5::Attr attr = open_attr(obj, name);
    h5::Type type(RT_H5_CHECK(H5Aget_type(attr.get()), attr_what(name)));
    RT_CHECK(H5Tget_class(type.get()) == H5T_INTEGER,
             "checkpoint {}: attribute '{}' is not an integer", path_, name);
    h5::Space space(RT_H5_CHECK(H5Aget_space(attr.get()), attr_what(name)));
    RT_CHECK(H5Sget_simple_extent_npoints(space.get()) == 1 &&
                 H5Sget_simple_extent_type(space.get()) != H5S_NULL,
             "checkpoint {}: attribute '{}' is not a single value", path_, name);
    RT_H5_CHECK(H5Aread(attr.get(), mem_type, out), attr_what(name));
  }
  std::uint64_t read_u64(hid_t obj, const char* name) {
    std::uint64_t v = 0;
    read_scalar_int(obj, name, H5T_NATIVE_UINT64, &v);
    return v;
  }
  std::int64_t read_i64(hid_t obj, const char* name) {
    std::int64_t v = 0;
    read_scalar_int(obj, name, H5T_NATIVE_INT64, &v);
    return v;
  }

  std::vector<std::uint64_t> read_u64_array(hid_t obj, const char* name) {
    h5::Attr attr = open_attr(obj, name);
    h5::Type type(RT_H5_CHECK(H5Aget_type(attr.get()), attr_what(name)));
    RT_CHECK(H5Tget_class(type.get()) == H5T_INTEGER,
             "checkpoint {}: attribute '{}' is not an integer array", path_, name);
    h5::Space space(RT_H5_CHECK(H5Aget_space(attr.get()), attr_what(name)));
    if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) return {};
    RT_CHECK(H5Sget_simple_extent_ndims(space.get()) == 1,
             "checkpoint {}: attribute '{}' is not 1-D", path_, name);
    std::vector<std::uint64_t> v(
        static_cast<std::size_t>(H5Sget_simple_extent_npoints(space.get())));
    if (!v.empty()) RT_H5_CHECK(H5Aread(attr.get(), H5T_NATIVE_UINT64, v.data()), attr_what(name));
    return v;
  }

  std::string read_string(hid_t obj, const char* name) {
    h5::Attr attr = open_attr(obj, name);
    h5::Type type(RT_H5_CHECK(H5Aget_type(attr.get()), attr_what(name)));
    RT_CHECK(H5Tget_class(type.get()) == H5T_STRING,
             "checkpoint {}: attribute '{}' is not a string", path_, name);
    if (H5Tis_variable_str(type.get()) > 0) {
      h5::Type mem = utf8_string_type(attr_what(name));
      char* buf = nullptr;
      RT_H5_CHECK(H5Aread(attr.get(), mem.get(), &buf), attr_what(name));
      std::string s = buf ? buf : "";
      H5free_memory(buf);
      return s;
    }
    // A fixed-length string (as other tools may write it).
    const std::size_t size = H5Tget_size(type.get());
    std::string s(size, '\0');
    RT_H5_CHECK(H5Aread(attr.get(), type.get(), s.data()), attr_what(name));
    s.resize(std::strlen(s.c_str()));
    return s;
  }

  void read_group(hid_t file, const char* group_name,
                  std::vector<std::pair<std::string, std::vector<float>>>& tensors,
                  std::vector<std::vector<std::size_t>>& shapes) {
    RT_CHECK(H5Lexists(file, group_name, H5P_DEFAULT) > 0, "checkpoint {}: missing group '{}'",
             path_, group_name);
    const std::string gwhat = fmt::format("checkpoint {}: group '{}'", path_, group_name);
    h5::Group group(RT_H5_CHECK(H5Gopen2(file, group_name, H5P_DEFAULT), gwhat));
    H5G_info_t info{};
    RT_H5_CHECK(H5Gget_info(group.get(), &info), gwhat);

    // Creation order is the model's parameter order; a file written by another
    // tool without it falls back to name order.
    h5::PropList gcpl(RT_H5_CHECK(H5Gget_create_plist(group.get()), gwhat));
    unsigned order_flags = 0;
    RT_H5_CHECK(H5Pget_link_creation_order(gcpl.get(), &order_flags), gwhat);
    const H5_index_t index =
        (order_flags & H5P_CRT_ORDER_INDEXED) ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;

    for (hsize_t i = 0; i < info.nlinks; ++i) {
      const ssize_t len = RT_H5_CHECK(
          H5Lget_name_by_idx(group.get(), ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT),
          gwhat);
      std::string name(static_cast<std::size_t>(len) + 1, '\0');
      RT_H5_CHECK(H5Lget_name_by_idx(group.get(), ".", index, H5_ITER_INC, i, name.data(),
                                     name.size(), H5P_DEFAULT),
                  gwhat);
      name.resize(static_cast<std::size_t>(len));
      std::vector<std::size_t> shape;
      tensors.emplace_back(name, read_tensor(group.get(), group_name, name, shape));
      shapes.push_back(std::move(shape));
    }
  }

  std::vector<float> read_tensor(hid_t group, const char* group_name, const std::string& name,
                                 std::vector<std::size_t>& shape) {
    const std::string what = fmt::format("checkpoint {}: dataset /{}/{}", path_, group_name, name);
    {
      h5::Object object(RT_H5_CHECK(H5Oopen(group, name.c_str(), H5P_DEFAULT), what));
      RT_CHECK(H5Iget_type(object.get()) == H5I_DATASET, "{}: not a dataset", what);
    }
    h5::DataSet dset(RT_H5_CHECK(H5Dopen2(group, name.c_str(), H5P_DEFAULT), what));
    h5::Type type(RT_H5_CHECK(H5Dget_type(dset.get()), what));
    RT_CHECK(H5Tget_class(type.get()) == H5T_FLOAT, "{}: not a floating-point dataset", what);
    h5::Space space(RT_H5_CHECK(H5Dget_space(dset.get()), what));
    const int ndims = RT_H5_CHECK(H5Sget_simple_extent_ndims(space.get()), what);
    std::vector<hsize_t> dims(static_cast<std::size_t>(ndims));
    if (ndims > 0) RT_H5_CHECK(H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr), what);
    shape.assign(dims.begin(), dims.end());
    std::vector<float> data(Shape(shape).numel());
    if (!data.empty()) {
      const herr_t rc =
          H5Dread(dset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
      RT_CHECK(rc >= 0, "{}: cannot read the data, the file is corrupt or truncated ({})", what,
               detail::hdf5_error_string());
    }
    return data;
  }

  std::string path_;
};

void check_tensor_list(const std::string& path, const char* group,
                       const std::vector<std::pair<std::string, std::vector<float>>>& have,
                       const std::vector<std::vector<std::size_t>>& have_shapes,
                       const std::vector<TensorSpec>& want) {
  auto names = [](const auto& list) {
    std::vector<std::string> out;
    for (const auto& t : list) out.push_back(t.name);
    return out;
  };
  std::vector<std::string> have_names;
  for (const auto& t : have) have_names.push_back(t.first);
  const std::vector<std::string> want_names = names(want);

  if (have.size() != want.size()) {
    // Name what is missing and what is extra: that is what the user can act on.
    std::vector<std::string> missing, extra;
    for (const auto& n : want_names)
      if (std::find(have_names.begin(), have_names.end(), n) == have_names.end())
        missing.push_back(n);
    for (const auto& n : have_names)
      if (std::find(want_names.begin(), want_names.end(), n) == want_names.end())
        extra.push_back(n);
    RT_CHECK(false,
             "checkpoint {}: group '{}' holds {} tensors, the model expects {} (missing: {}; "
             "unexpected: {})",
             path, group, have.size(), want.size(),
             missing.empty() ? "none" : fmt::format("{}", fmt::join(missing, ", ")),
             extra.empty() ? "none" : fmt::format("{}", fmt::join(extra, ", ")));
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    RT_CHECK(have_names[i] == want[i].name,
             "checkpoint {}: tensor {} of group '{}' is '{}', the model expects '{}'", path, i,
             group, have_names[i], want[i].name);
    RT_CHECK(have_shapes[i] == want[i].shape,
             "checkpoint {}: tensor '{}/{}' has shape {} ({} elements), the model expects {} ({} "
             "elements)",
             path, group, want[i].name, Shape(have_shapes[i]).to_string(), have[i].second.size(),
             Shape(want[i].shape).to_string(), Shape(want[i].shape).numel());
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// Public API.
// ---------------------------------------------------------------------------

std::string checkpoint_file_name(std::uint64_t step) {
  return fmt::format("ckpt-{}.h5", step);
}

std::string write_checkpoint_atomic(const std::string& dir, const CheckpointMeta& meta,
                                    const std::vector<TensorRecord>& params,
                                    const std::vector<TensorRecord>& optimizer_state,
                                    std::size_t keep, const std::vector<TensorRecord>& buffers) {
  RT_CHECK(!dir.empty(), "checkpoint: empty directory name");
  const std::string final_path = (fs::path(dir) / checkpoint_file_name(meta.step)).string();
  check_records(params, kParamsGroup, final_path);
  check_records(optimizer_state, kOptimizerGroup, final_path);
  check_finite(params, kParamsGroup, final_path);
  check_finite(optimizer_state, kOptimizerGroup, final_path);
  check_records(buffers, kBuffersGroup, final_path);
  check_finite(buffers, kBuffersGroup, final_path);

  std::error_code ec;
  fs::create_directories(dir, ec);
  RT_CHECK(!ec, "checkpoint: cannot create directory {}: {}", dir, ec.message());
  RT_CHECK(fs::is_directory(dir, ec), "checkpoint: {} is not a directory", dir);

  // Same directory, so the rename cannot cross file systems.
  const std::string tmp_path = fmt::format("{}{}{}", final_path, kTempMarker, ::getpid());
  // Serial HDF5 is not thread-safe, and the prefetcher may be reading the
  // data set on its own thread: every HDF5 call holds the library lock.
  std::lock_guard lock(h5::library_mutex());
  h5::quiet_errors();
  try {
    write_file(tmp_path, final_path, meta, params, optimizer_state, buffers);
    fsync_path(tmp_path, false);
    RT_CHECK(std::rename(tmp_path.c_str(), final_path.c_str()) == 0,
             "checkpoint: cannot rename {} to {}: {}", tmp_path, final_path, std::strerror(errno));
  } catch (...) {
    fs::remove(tmp_path, ec);
    throw;
  }
  // The rename is durable only once the directory entry is on disk.
  fsync_path(dir, true);
  prune(dir, meta.step, keep);
  return final_path;
}

LoadedCheckpoint read_checkpoint(const std::string& path) {
  // Serial HDF5 is not thread-safe, and the prefetcher may be reading the
  // data set on its own thread: every HDF5 call holds the library lock.
  std::lock_guard lock(h5::library_mutex());
  h5::quiet_errors();
  return CheckpointReader(path).read();
}

void validate_checkpoint(const LoadedCheckpoint& ckpt, const CheckpointExpectation& expected) {
  RT_CHECK(ckpt.meta.model_hash == expected.model_hash,
           "checkpoint {}: written for model '{}' (hash {:#018x}), this run's model is '{}' (hash "
           "{:#018x})",
           ckpt.path, ckpt.meta.model_spec, ckpt.meta.model_hash, expected.model_spec,
           expected.model_hash);
  check_tensor_list(ckpt.path, kParamsGroup, ckpt.params, ckpt.param_shapes, expected.params);
  if (expected.optimizer)
    check_tensor_list(ckpt.path, kOptimizerGroup, ckpt.optimizer, ckpt.optimizer_shapes,
                      *expected.optimizer);
  check_tensor_list(ckpt.path, kBuffersGroup, ckpt.buffers, ckpt.buffer_shapes, expected.buffers);
}

LoadedCheckpoint read_checkpoint(const std::string& path, const CheckpointExpectation& expected) {
  LoadedCheckpoint ckpt = read_checkpoint(path);
  validate_checkpoint(ckpt, expected);
  return ckpt;
}

std::vector<std::pair<std::uint64_t, std::string>> list_checkpoints(const std::string& dir) {
  std::vector<std::pair<std::uint64_t, std::string>> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  fs::directory_iterator it(dir, ec);
  RT_CHECK(!ec, "checkpoint: cannot list directory {}: {}", dir, ec.message());
  for (const auto& entry : it) {
    if (!entry.is_regular_file(ec)) continue;
    if (auto step = parse_checkpoint_name(entry.path().filename().string()))
      out.emplace_back(*step, entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<std::string> latest_checkpoint(const std::string& dir) {
  auto all = list_checkpoints(dir);
  if (all.empty()) return std::nullopt;
  return all.back().second;
}

}  // namespace ringtrain
