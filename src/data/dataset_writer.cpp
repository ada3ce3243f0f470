#include "ringtrain/data/dataset_writer.h"

#include <array>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <unistd.h>

#include "core/hdf5.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/temp_file_guard.h"

namespace ringtrain {

struct DatasetWriter::Impl {
  std::string path, tmp_path;
  // Removes the temporary if a signal ends the process before the rename.
  std::optional<TempFileGuard> interrupted;
  h5::File file;
  bool committed = false;
  // The split being written.
  bool open = false;
  SplitSpec spec;
  h5::Group group;
  h5::DataSet x, y;
  std::size_t written = 0, elems = 0;
  std::string where() const { return fmt::format("{}:/{}", path, spec.name); }
};

std::size_t DatasetWriter::chunk_rows(std::size_t row_bytes, std::size_t n) {
  const std::size_t rows =
      std::max<std::size_t>(1, (32u << 10) / std::max<std::size_t>(row_bytes, 1));
  return std::max<std::size_t>(1, std::min(rows, n));
}

DatasetWriter::DatasetWriter(const std::string& path) : impl_(std::make_unique<Impl>()) {
  std::lock_guard lock(h5::library_mutex());
  h5::quiet_errors();
  impl_->path = path;
  // Unique per process: two conversions to one name never share a temporary.
  impl_->tmp_path = fmt::format("{}.tmp-{}", path, static_cast<long>(::getpid()));
  impl_->interrupted.emplace(impl_->tmp_path);
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  RT_CHECK(parent.empty() || std::filesystem::is_directory(parent, ec),
           "output {}: directory {} does not exist", path, parent.string());
  impl_->file =
      h5::File(H5Fcreate(impl_->tmp_path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  RT_CHECK(impl_->file.valid(), "cannot create {}: {}", impl_->tmp_path,
           detail::hdf5_error_string());
}

DatasetWriter::~DatasetWriter() {
  std::lock_guard lock(h5::library_mutex());
  impl_->x.reset();
  impl_->y.reset();
  impl_->group.reset();
  impl_->file.reset();
  if (!impl_->committed) std::remove(impl_->tmp_path.c_str());
}

void DatasetWriter::begin_split(const SplitSpec& spec) {
  std::lock_guard lock(h5::library_mutex());
  Impl& w = *impl_;
  RT_CHECK(!w.open, "{}: split /{} is still open", w.path, w.spec.name);
  RT_CHECK(spec.n >= 1, "{}: split /{} has no samples", w.path, spec.name);
  RT_CHECK(!spec.sample_shape.empty() && spec.sample_shape.size() < H5S_MAX_RANK &&
               (spec.encoding.empty() || spec.sample_shape.size() == 3),
           "{}: split /{}: bad sample shape {}", w.path, spec.name,
           shape_string(spec.sample_shape));
  RT_CHECK(spec.num_classes >= 1, "{}: split /{}: num_classes must be >= 1", w.path, spec.name);
  RT_CHECK(spec.class_names.empty() ||
               spec.class_names.size() == static_cast<std::size_t>(spec.num_classes),
           "{}: split /{}: {} class names for {} classes", w.path, spec.name,
           spec.class_names.size(), spec.num_classes);
  w.spec = spec;
  w.written = 0;
  w.elems = 1;
  for (std::size_t s : spec.sample_shape) w.elems *= spec.encoding.empty() ? s : 1;
  const std::string where = w.where();
  w.group = h5::Group(RT_H5_CHECK(
      H5Gcreate2(w.file.get(), spec.name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), where));
  h5::write_attr_int(w.group.get(), "num_classes", spec.num_classes, where);
  if (!spec.class_names.empty())
    h5::write_attr_strings(w.group.get(), "class_names", spec.class_names, where);
  if (spec.dtype == SampleDType::u8) {
    h5::write_attr_float(w.group.get(), "scale", spec.scale, where);
    h5::write_attr_float(w.group.get(), "offset", spec.offset, where);
  }

  if (!spec.encoding.empty()) {
    RT_CHECK(spec.encoding == "jpeg", "{}: unknown encoding '{}'", where, spec.encoding);
    h5::write_attr_strings(w.group.get(), "encoding", {spec.encoding}, where);
    h5::write_attr_int(w.group.get(), "channels", static_cast<long long>(spec.sample_shape[0]),
                       where);
    h5::write_attr_int(w.group.get(), "height", static_cast<long long>(spec.sample_shape[1]),
                       where);
    h5::write_attr_int(w.group.get(), "width", static_cast<long long>(spec.sample_shape[2]), where);
    const hsize_t n = spec.n, maxn = spec.may_end_short ? H5S_UNLIMITED : spec.n;
    const hsize_t chunk = std::min<hsize_t>(spec.n, 1024);
    h5::Space xspace(RT_H5_CHECK(H5Screate_simple(1, &n, &maxn), where));
    h5::PropList xdcpl(H5Pcreate(H5P_DATASET_CREATE));
    RT_H5_CHECK(H5Pset_chunk(xdcpl.get(), 1, &chunk), where + "/x");
    h5::Type vlen(H5Tvlen_create(H5T_STD_U8LE));
    w.x = h5::DataSet(RT_H5_CHECK(H5Dcreate2(w.group.get(), "x", vlen.get(), xspace.get(),
                                             H5P_DEFAULT, xdcpl.get(), H5P_DEFAULT),
                                  where + "/x"));
  } else {
    const std::size_t rank = spec.sample_shape.size() + 1;
    std::array<hsize_t, H5S_MAX_RANK> dims{}, chunk{};
    dims[0] = spec.n;
    const std::size_t esize = spec.dtype == SampleDType::u8 ? 1 : 4;
    chunk[0] = chunk_rows(w.elems * esize, spec.n);
    for (std::size_t k = 0; k + 1 < rank; ++k) dims[k + 1] = chunk[k + 1] = spec.sample_shape[k];
    std::array<hsize_t, H5S_MAX_RANK> maxdims = dims;
    if (spec.may_end_short) maxdims[0] = H5S_UNLIMITED;
    h5::Space xspace(
        RT_H5_CHECK(H5Screate_simple(static_cast<int>(rank), dims.data(), maxdims.data()), where));
    h5::PropList xdcpl(H5Pcreate(H5P_DATASET_CREATE));
    RT_H5_CHECK(H5Pset_chunk(xdcpl.get(), static_cast<int>(rank), chunk.data()), where + "/x");
    const hid_t xtype = spec.dtype == SampleDType::u8 ? H5T_STD_U8LE : H5T_IEEE_F32LE;
    // A chunk cache that holds a whole append, so no chunk is written twice.
    h5::PropList xdapl(H5Pcreate(H5P_DATASET_ACCESS));
    H5Pset_chunk_cache(xdapl.get(), 12421, 64u << 20, 1.0);
    w.x = h5::DataSet(RT_H5_CHECK(
        H5Dcreate2(w.group.get(), "x", xtype, xspace.get(), H5P_DEFAULT, xdcpl.get(), xdapl.get()),
        where + "/x"));
  }

  if (!spec.labelled) {
    w.open = true;
    return;
  }
  const hsize_t n = spec.n, ychunk = std::min<hsize_t>(spec.n, 1u << 16);
  const hsize_t ymax = spec.may_end_short ? H5S_UNLIMITED : n;
  h5::Space yspace(RT_H5_CHECK(H5Screate_simple(1, &n, &ymax), where));
  h5::PropList ydcpl(H5Pcreate(H5P_DATASET_CREATE));
  RT_H5_CHECK(H5Pset_chunk(ydcpl.get(), 1, &ychunk), where + "/y");
  w.y = h5::DataSet(RT_H5_CHECK(H5Dcreate2(w.group.get(), "y", H5T_STD_I32LE, yspace.get(),
                                           H5P_DEFAULT, ydcpl.get(), H5P_DEFAULT),
                                where + "/y"));
  w.open = true;
}

void DatasetWriter::append(const void* x, const std::int32_t* y, std::size_t count) {
  std::lock_guard lock(h5::library_mutex());
  Impl& w = *impl_;
  RT_CHECK(w.open, "{}: append without an open split", w.path);
  RT_CHECK(w.written + count <= w.spec.n, "{}: more than the declared {} samples", w.where(),
           w.spec.n);
  if (count == 0) return;
  RT_CHECK(w.spec.labelled == (y != nullptr),
           "{}: labels given for an unlabelled split, or none "
           "for a labelled one",
           w.where());
  for (std::size_t i = 0; w.spec.labelled && i < count; ++i)
    RT_CHECK(y[i] >= 0 && y[i] < w.spec.num_classes, "{}: label {} of sample {} is outside [0, {})",
             w.where(), y[i], w.written + i, w.spec.num_classes);
  const std::size_t rank = w.spec.sample_shape.size() + 1;
  std::array<hsize_t, H5S_MAX_RANK> start{}, block{};
  start[0] = w.written;
  block[0] = count;
  for (std::size_t k = 0; k + 1 < rank; ++k) block[k + 1] = w.spec.sample_shape[k];
  {
    h5::Space fspace(H5Dget_space(w.x.get()));
    RT_H5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr,
                                    block.data(), nullptr),
                w.where() + "/x");
    // Memory shaped like the selection: HDF5 then maps whole blocks to chunks
    // instead of walking every element.
    h5::Space mspace(H5Screate_simple(static_cast<int>(rank), block.data(), nullptr));
    const hid_t mtype = w.spec.dtype == SampleDType::u8 ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT;
    RT_H5_CHECK(H5Dwrite(w.x.get(), mtype, mspace.get(), fspace.get(), H5P_DEFAULT, x),
                w.where() + "/x");
  }
  if (w.spec.labelled) {
    h5::Space fspace(H5Dget_space(w.y.get()));
    const hsize_t ystart = w.written, ycount = count;
    RT_H5_CHECK(
        H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &ystart, nullptr, &ycount, nullptr),
        w.where() + "/y");
    h5::Space mspace(H5Screate_simple(1, &ycount, nullptr));
    RT_H5_CHECK(H5Dwrite(w.y.get(), H5T_NATIVE_INT32, mspace.get(), fspace.get(), H5P_DEFAULT, y),
                w.where() + "/y");
  }
  w.written += count;
}

void DatasetWriter::append_encoded(const std::vector<std::vector<std::uint8_t>>& x,
                                   const std::int32_t* y, std::size_t count) {
  std::lock_guard lock(h5::library_mutex());
  Impl& w = *impl_;
  RT_CHECK(w.open && !w.spec.encoding.empty(), "{}: append_encoded without an open encoded split",
           w.path);
  RT_CHECK(count <= x.size() && w.written + count <= w.spec.n,
           "{}: more than the declared {} samples", w.where(), w.spec.n);
  if (count == 0) return;
  for (std::size_t i = 0; i < count; ++i)
    RT_CHECK(y[i] >= 0 && y[i] < w.spec.num_classes, "{}: label {} of sample {} is outside [0, {})",
             w.where(), y[i], w.written + i, w.spec.num_classes);
  std::vector<hvl_t> v(count);
  for (std::size_t i = 0; i < count; ++i)
    v[i] = {x[i].size(), const_cast<std::uint8_t*>(x[i].data())};  // HDF5 only reads them
  const hsize_t start = w.written, n = count;
  for (auto [ds, what] : {std::pair{w.x.get(), "/x"}, std::pair{w.y.get(), "/y"}}) {
    h5::Space fspace(H5Dget_space(ds));
    RT_H5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &n, nullptr),
                w.where() + what);
    h5::Space mspace(H5Screate_simple(1, &n, nullptr));
    if (ds == w.x.get()) {
      h5::Type vlen(H5Tvlen_create(H5T_NATIVE_UINT8));
      RT_H5_CHECK(H5Dwrite(ds, vlen.get(), mspace.get(), fspace.get(), H5P_DEFAULT, v.data()),
                  w.where() + what);
    } else {
      RT_H5_CHECK(H5Dwrite(ds, H5T_NATIVE_INT32, mspace.get(), fspace.get(), H5P_DEFAULT, y),
                  w.where() + what);
    }
  }
  w.written += count;
}

void DatasetWriter::end_split() {
  std::lock_guard lock(h5::library_mutex());
  Impl& w = *impl_;
  RT_CHECK(w.open, "{}: end_split without an open split", w.path);
  if (w.spec.may_end_short && w.written < w.spec.n) {
    RT_CHECK(w.written >= 1, "{}: no samples written", w.where());
    std::array<hsize_t, H5S_MAX_RANK> dims{};
    dims[0] = w.written;
    if (w.spec.encoding.empty())
      for (std::size_t k = 0; k < w.spec.sample_shape.size(); ++k)
        dims[k + 1] = w.spec.sample_shape[k];
    RT_H5_CHECK(H5Dset_extent(w.x.get(), dims.data()), w.where() + "/x");
    RT_H5_CHECK(H5Dset_extent(w.y.get(), dims.data()), w.where() + "/y");
  }
  RT_CHECK(w.written == w.spec.n || (w.spec.may_end_short && w.written >= 1),
           "{}: {} samples written, {} declared", w.where(), w.written, w.spec.n);
  w.x.reset();
  w.y.reset();
  w.group.reset();
  w.open = false;
}

void DatasetWriter::commit() {
  std::lock_guard lock(h5::library_mutex());
  Impl& w = *impl_;
  RT_CHECK(!w.open, "{}: split /{} is still open at commit", w.path, w.spec.name);
  RT_H5_CHECK(H5Fflush(w.file.get(), H5F_SCOPE_GLOBAL), w.tmp_path);
  w.file.reset();
  std::error_code ec;
  std::filesystem::rename(w.tmp_path, w.path, ec);
  RT_CHECK(!ec, "cannot rename {} to {}: {}", w.tmp_path, w.path, ec.message());
  w.committed = true;
  w.interrupted.reset();
}

}  // namespace ringtrain
