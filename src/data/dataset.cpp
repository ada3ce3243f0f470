// Reading one split of a ringtrain HDF5 dataset. Every failure names the file,
// the split and the dataset; the format is described in dataset.h.
#include "ringtrain/data/dataset.h"

#include <unistd.h>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>

#include "comm/broadcast_text.h"
#include "core/fault_plan.h"
#include "core/hdf5.h"
#include "data/image_decode.h"
#include "data/loader_threads.h"
#include "data/pixel_conversion.h"
#include "data/token_split.h"
#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/fatal.h"
#include "ringtrain/core/input_error.h"
#include "ringtrain/core/log.h"
#include "ringtrain/data/sample_transform.h"

namespace ringtrain {

const char* sample_dtype_name(SampleDType t) {
  return t == SampleDType::u8 ? "uint8" : "float32";
}

std::string shape_string(const std::vector<std::size_t>& shape) {
  if (shape.empty()) return "(scalar)";
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) s.push_back('x');
    s.append(std::to_string(shape[i]));
  }
  return s;
}

std::vector<std::size_t> parse_shape(const std::string& text, const std::string& what) {
  std::vector<std::size_t> shape;
  std::size_t pos = 0;
  RT_CHECK(!text.empty(), "{}: empty shape (expected e.g. 1,28,28 or 20)", what);
  while (pos <= text.size()) {
    const std::size_t end = std::min(text.find_first_of(",x", pos), text.size());
    const std::string part = text.substr(pos, end - pos);
    RT_CHECK(
        !part.empty() && part.find_first_not_of("0123456789") == std::string::npos,
        "{}: bad shape '{}' (expected positive integers separated by ',' or 'x', e.g. 1,28,28)",
        what, text);
    const unsigned long long v = std::stoull(part);
    RT_CHECK(v > 0, "{}: bad shape '{}': every dimension must be positive", what, text);
    shape.push_back(static_cast<std::size_t>(v));
    pos = end + 1;
  }
  return shape;
}

namespace {
// Where a read goes: floats (read) or bytes before the widening (read_bytes).
struct ReadOutput {
  float* floats = nullptr;
  std::uint8_t* bytes = nullptr;
};
}  // namespace

struct Dataset::Impl {
  std::string path, split;
  h5::File file;
  h5::DataSet x;
  SampleDType dtype = SampleDType::f32;
  std::vector<std::size_t> shape;
  std::size_t elems = 0, n = 0;
  float scale = 1.0f, offset = 0.0f;
  int num_classes = 0;
  std::vector<std::string> class_names;
  std::vector<std::int32_t> labels;
  bool has_labels = true;
  Dataset::OutOfRangeLabels out_of_range;  // Labels::inspect only
  std::vector<unsigned char> cache;        // whole x in stored dtype, when enabled
  bool cached = false;
  std::mutex read_mutex;  // read() reuses the scratch buffers below
  std::vector<unsigned char> staging;
  std::vector<std::pair<std::uint64_t, std::size_t>> order;
  std::vector<std::size_t> slot_of;
  // Direct reads (see read()): x's rows sit at known file offsets.
  bool direct = false;
  int fd = -1;
  std::size_t rows_per_chunk = 0;            // n for a contiguous layout
  std::vector<std::uint64_t> chunk_address;  // 0: not looked up yet
  std::uint64_t file_size = 0;
  // --augment / --eval-transform
  std::shared_ptr<const SampleTransform> transform;
  std::vector<std::size_t> out_shape;  // what read() gives (shape without a transform)
  std::size_t out_elems = 0;
  std::unique_ptr<LoaderThreads> threads;
  std::vector<const unsigned char*> rows;  // a batch's stored rows, for the threads
  bool encoded = false;                    // x holds JPEG byte strings
  std::unique_ptr<TokenSplit> tokens;      // a token split (tokens instead of x and y)

  ~Impl() {
    if (fd >= 0) ::close(fd);
  }
  std::size_t stored_size() const { return dtype == SampleDType::u8 ? 1 : 4; }
  std::string where(const char* dataset = nullptr) const {
    return dataset ? fmt::format("{}:/{}/{}", path, split, dataset)
                   : fmt::format("{}:/{}", path, split);
  }
  hid_t mem_type() const { return dtype == SampleDType::u8 ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT; }
  // Stored row -> float32 row: bytes * scale + offset, or a copy for float32.
  void convert_row(const unsigned char* src, float* dst) const {
    if (dtype == SampleDType::u8) {
      bytes_to_float(src, dst, elems, scale, offset);
    } else {
      std::memcpy(dst, src, elems * sizeof(float));
    }
  }
  // Row i of a read's output: floats, or (read_bytes) the stored bytes.
  void emit_row(const unsigned char* src, const ReadOutput& out, std::size_t i) const {
    if (out.bytes)
      std::memcpy(out.bytes + i * elems, src, elems);
    else
      convert_row(src, out.floats + i * elems);
  }
};

Dataset::Dataset(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Dataset::Dataset(Dataset&&) noexcept = default;
Dataset& Dataset::operator=(Dataset&&) noexcept = default;
Dataset::~Dataset() {
  if (!impl_) return;
  std::lock_guard lock(h5::library_mutex());
  impl_->tokens.reset();
  impl_->x.reset();
  impl_->file.reset();
}

namespace {

SampleDType sample_dtype_of(hid_t type, const std::string& where) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t size = H5Tget_size(type);
  if (cls == H5T_INTEGER && size == 1 && H5Tget_sign(type) == H5T_SGN_NONE) return SampleDType::u8;
  if (cls == H5T_FLOAT && size == 4) return SampleDType::f32;
  const char* kind = cls == H5T_INTEGER  ? (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int")
                     : cls == H5T_FLOAT  ? "float"
                     : cls == H5T_STRING ? "string"
                                         : "non-numeric";
  RT_CHECK(false, "{}: unsupported dtype {}{} (x must be uint8 or float32)", where, kind, size * 8);
}

void check_label_dtype(hid_t type, const std::string& where) {
  const H5T_class_t cls = H5Tget_class(type);
  const std::size_t size = H5Tget_size(type);
  RT_CHECK(cls == H5T_INTEGER && (size == 4 || size == 8) && H5Tget_sign(type) == H5T_SGN_2,
           "{}: unsupported dtype {}{} (y must be int32 or int64)", where,
           cls == H5T_INTEGER ? (H5Tget_sign(type) == H5T_SGN_NONE ? "uint" : "int")
           : cls == H5T_FLOAT ? "float"
                              : "non-integer",
           size * 8);
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& e : v) s += (s.empty() ? "" : ", ") + e;
  return s.empty() ? "none" : s;
}

std::size_t available_memory_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::size_t kb = 0;
  std::string unit;
  while (meminfo >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<std::size_t>(pages) * static_cast<std::size_t>(page)
                               : 0;
}

}  // namespace

namespace {

// Direct reads bypass HDF5's selection machinery, whose per-call cost (tens of
// microseconds) dominates a random batch of small samples. They apply only
// where HDF5 itself would do nothing but copy bytes: no filters (compression,
// checksums), whole samples per chunk, the default sec2 file driver, and a
// stored byte order equal to the host's. Chunk addresses come from HDF5
// (H5Dget_chunk_info_by_coord), looked up once per chunk on first use. Any
// other layout is read by hyperslab through HDF5.
void setup_direct_reads(Dataset::Impl& d) {
  h5::PropList dcpl(H5Dget_create_plist(d.x.get()));
  h5::PropList fapl(H5Fget_access_plist(d.file.get()));
  if (!dcpl.valid() || !fapl.valid() || H5Pget_nfilters(dcpl.get()) != 0) return;
  if (H5Pget_driver(fapl.get()) != H5FD_SEC2) return;
  if (d.dtype == SampleDType::f32) {
    h5::Type t(H5Dget_type(d.x.get()));
    if (H5Tget_order(t.get()) != H5T_ORDER_LE || std::endian::native != std::endian::little) return;
  }
  const H5D_layout_t layout = H5Pget_layout(dcpl.get());
  if (layout == H5D_CONTIGUOUS) {
    const haddr_t addr = H5Dget_offset(d.x.get());
    if (addr == HADDR_UNDEF) return;
    d.rows_per_chunk = d.n;
    d.chunk_address.assign(1, static_cast<std::uint64_t>(addr));
  } else if (layout == H5D_CHUNKED) {
    std::array<hsize_t, H5S_MAX_RANK> chunk{};
    const int rank = H5Pget_chunk(dcpl.get(), H5S_MAX_RANK, chunk.data());
    if (rank != static_cast<int>(d.shape.size() + 1) || chunk[0] == 0) return;
    for (std::size_t k = 0; k < d.shape.size(); ++k)
      if (chunk[k + 1] != d.shape[k]) return;
    d.rows_per_chunk = static_cast<std::size_t>(chunk[0]);
    d.chunk_address.assign((d.n + d.rows_per_chunk - 1) / d.rows_per_chunk, 0);
  } else {
    return;
  }
  d.fd = ::open(d.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (d.fd < 0) return;
  struct stat st {};
  if (::fstat(d.fd, &st) != 0) return;
  d.file_size = static_cast<std::uint64_t>(st.st_size);
  d.direct = true;
}

// The file address of chunk c; an Error names the file when the chunk was
// never written or lies past the end of the file (a truncated file).
std::uint64_t chunk_address(Dataset::Impl& d, std::size_t c) {
  if (d.chunk_address[c] != 0) return d.chunk_address[c];
  std::lock_guard lock(h5::library_mutex());
  std::array<hsize_t, H5S_MAX_RANK> coord{};
  coord[0] = static_cast<hsize_t>(c * d.rows_per_chunk);
  unsigned mask = 0;
  haddr_t addr = HADDR_UNDEF;
  hsize_t size = 0;
  RT_CHECK(H5Dget_chunk_info_by_coord(d.x.get(), coord.data(), &mask, &addr, &size) >= 0,
           "{}: cannot locate the chunk of samples from {}: {} (corrupt file?)", d.where("x"),
           coord[0], detail::hdf5_error_string());
  const std::size_t row_bytes = d.elems * d.stored_size();
  RT_CHECK(addr != HADDR_UNDEF && addr != 0,
           "{}: the chunk holding samples {}..{} was never written (incomplete file?)",
           d.where("x"), coord[0], coord[0] + d.rows_per_chunk);
  RT_CHECK(
      size >= d.rows_per_chunk * row_bytes && addr + size <= d.file_size,
      "{}: the chunk holding samples {}.. lies outside the file ({} bytes at {}, file size {}): "
      "truncated or corrupt file",
      d.where("x"), coord[0], size, addr, d.file_size);
  d.chunk_address[c] = static_cast<std::uint64_t>(addr);
  return d.chunk_address[c];
}

void pread_fully(const Dataset::Impl& d, unsigned char* out, std::size_t bytes, std::uint64_t at,
                 std::uint64_t first_sample) {
  std::size_t done = 0;
  while (done < bytes) {
    const ssize_t got = ::pread(d.fd, out + done, bytes - done, static_cast<off_t>(at + done));
    if (got < 0 && errno == EINTR) continue;
    RT_CHECK(got > 0,
             "{}: reading sample {} at file offset {} failed: {} (truncated or corrupt file?)",
             d.where("x"), first_sample, at + done, got < 0 ? std::strerror(errno) : "end of file");
    done += static_cast<std::size_t>(got);
  }
}

}  // namespace

std::vector<std::string> Dataset::splits(const std::string& path) {
  std::lock_guard lock(h5::library_mutex());
  h5::quiet_errors();
  std::error_code ec;
  RT_CHECK(std::filesystem::is_regular_file(path, ec), "dataset file {} does not exist", path);
  RT_CHECK(H5Fis_hdf5(path.c_str()) > 0, "dataset file {} is not an HDF5 file", path);
  h5::File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  RT_CHECK(file.valid(), "dataset file {} cannot be opened: {} (truncated or corrupt file?)", path,
           detail::hdf5_error_string());
  return h5::child_groups(file.get());
}

Dataset Dataset::open(const std::string& path, const std::string& split, Labels labels) {
  std::lock_guard lock(h5::library_mutex());
  h5::quiet_errors();
  auto impl = std::make_unique<Impl>();
  Impl& d = *impl;
  d.path = path;
  d.split = split;
  RT_CHECK(!split.empty() && split.find('/') == std::string::npos,
           "{}: bad split name '{}' (expected train, test or val)", path, split);
  std::error_code ec;
  RT_CHECK(std::filesystem::exists(path, ec), "dataset file {} does not exist (split /{})", path,
           split);
  RT_CHECK(!std::filesystem::is_directory(path, ec), "dataset file {} is a directory (split /{})",
           path, split);
  RT_CHECK(H5Fis_hdf5(path.c_str()) > 0,
           "dataset file {} (split /{}) is not an HDF5 file: no HDF5 signature (corrupt, or not "
           "converted? see 'ringtrain convert')",
           path, split);
  d.file = h5::File(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  RT_CHECK(d.file.valid(),
           "dataset file {} (split /{}) cannot be opened: {} (truncated or corrupt file?)", path,
           split, detail::hdf5_error_string());

  RT_CHECK(h5::link_exists(d.file.get(), split), "{}: no split /{} (splits present: {})", path,
           split, joined(h5::child_groups(d.file.get())));
  h5::Group group(H5Gopen2(d.file.get(), split.c_str(), H5P_DEFAULT));
  RT_CHECK(group.valid(), "{}: /{} is not a group: {}", path, split, detail::hdf5_error_string());
  if (h5::link_exists(group.get(), "tokens") && !h5::link_exists(group.get(), "x")) {
    // Samples appear once set_token_context gives them a length.
    d.tokens = std::make_unique<TokenSplit>(d.file.get(), group.get(), d.where());
    d.num_classes = static_cast<int>(d.tokens->vocab_size());
    return Dataset(std::move(impl));
  }
  d.has_labels = h5::link_exists(group.get(), "y");
  for (const char* name : {"x", "y"})
    RT_CHECK(h5::link_exists(group.get(), name) ||
                 (std::string_view(name) == "y" && labels != Labels::required),
             "{}: no dataset '{}' in split /{} (expected /{}/x and /{}/y)", path, name, split,
             split, split);

  // Chunk cache: enough for a few batches of random chunks without --cache.
  h5::PropList dapl(H5Pcreate(H5P_DATASET_ACCESS));
  H5Pset_chunk_cache(dapl.get(), 12421, 32u << 20, 1.0);
  d.x = h5::DataSet(H5Dopen2(group.get(), "x", dapl.get()));
  RT_CHECK(d.x.valid(), "{}: cannot open dataset: {} (corrupt file?)", d.where("x"),
           detail::hdf5_error_string());
  h5::DataSet y(d.has_labels ? H5Dopen2(group.get(), "y", H5P_DEFAULT) : H5I_INVALID_HID);
  RT_CHECK(!d.has_labels || y.valid(), "{}: cannot open dataset: {} (corrupt file?)", d.where("y"),
           detail::hdf5_error_string());

  {
    h5::Type xt(H5Dget_type(d.x.get()));
    // Encoded images (convert images --store jpeg): one byte string each.
    d.encoded = H5Tget_class(xt.get()) == H5T_VLEN;
    d.dtype = d.encoded ? SampleDType::u8 : sample_dtype_of(xt.get(), d.where("x"));
    if (d.has_labels) {
      h5::Type yt(H5Dget_type(y.get()));
      check_label_dtype(yt.get(), d.where("y"));
    }
  }
  const std::vector<hsize_t> xdims = h5::dims_of(d.x.get());
  // Without labels, y's checks below see a y of the right length.
  const std::vector<hsize_t> ydims =
      d.has_labels ? h5::dims_of(y.get()) : std::vector<hsize_t>{xdims.empty() ? 0 : xdims[0]};
  RT_CHECK(xdims.size() <= H5S_MAX_RANK, "{}: rank {} too large", d.where("x"), xdims.size());
  RT_CHECK(xdims.size() >= 2 || (d.encoded && xdims.size() == 1),
           "{}: x must have rank >= 2 (N x sample shape), it has rank {}", d.where("x"),
           xdims.size());
  RT_CHECK(ydims.size() == 1, "{}: y must have rank 1 (N labels), it has rank {}", d.where("y"),
           ydims.size());
  RT_CHECK(xdims[0] == ydims[0], "{}: x has {} samples but y has {} labels (lengths must match)",
           d.where(), xdims[0], ydims[0]);
  d.n = static_cast<std::size_t>(xdims[0]);
  d.shape.assign(xdims.begin() + 1, xdims.end());
  if (d.encoded) {
    const auto enc = h5::read_attr_strings(group.get(), "encoding", d.where());
    RT_CHECK(enc && enc->size() == 1 && (*enc)[0] == "jpeg",
             "{}: variable-length x needs the attribute encoding = jpeg", d.where("x"));
    d.shape.clear();
    for (const char* a : {"channels", "height", "width"}) {
      const auto v = h5::read_attr_number(group.get(), a, d.where());
      RT_CHECK(v && *v >= 0 && *v <= 65535, "{}: encoded images need the attribute {}", d.where(),
               a);
      d.shape.push_back(static_cast<std::size_t>(*v));
    }
    RT_CHECK(d.shape[0] == 1 || d.shape[0] == 3, "{}: channels = {} (expected 1 or 3)", d.where(),
             d.shape[0]);
  }
  d.elems = 1;
  for (std::size_t s : d.shape) d.elems *= s;
  // Encoded images of varying size (height = width = 0) get a shape from their transform.
  RT_CHECK(d.elems > 0 || d.encoded, "{}: empty sample shape {}", d.where("x"),
           shape_string(d.shape));
  d.out_shape = d.shape;
  d.out_elems = d.elems;

  // Attributes on the split group, else on the file root.
  auto number = [&](const char* name) {
    auto v = h5::read_attr_number(group.get(), name, d.where());
    return v ? v : h5::read_attr_number(d.file.get(), name, path + ":/");
  };
  const auto classes = number("num_classes");
  RT_CHECK(classes.has_value(), "{}: missing attribute num_classes (on /{} or the file root)",
           d.where(), split);
  RT_CHECK(*classes >= 1 && *classes <= 1e9 &&
               *classes == static_cast<double>(static_cast<long long>(*classes)),
           "{}: attribute num_classes = {} must be a positive integer", d.where(), *classes);
  d.num_classes = static_cast<int>(*classes);
  if (d.dtype == SampleDType::u8) {
    const auto scale = number("scale"), offset = number("offset");
    RT_CHECK(
        scale && offset,
        "{}: uint8 x needs attributes scale and offset (value = byte * scale + offset), missing {}",
        d.where(), !scale ? (offset ? "scale" : "scale and offset") : "offset");
    d.scale = static_cast<float>(*scale);
    d.offset = static_cast<float>(*offset);
  }
  auto names = h5::read_attr_strings(group.get(), "class_names", d.where());
  if (!names) names = h5::read_attr_strings(d.file.get(), "class_names", path + ":/");
  if (names) {
    RT_CHECK(names->size() == static_cast<std::size_t>(d.num_classes),
             "{}: class_names has {} entries but num_classes is {}", d.where(), names->size(),
             d.num_classes);
    d.class_names = std::move(*names);
  }

  if (!d.encoded) setup_direct_reads(d);

  // Labels: read and validated once, in slabs.
  d.labels.assign(d.n, 0);
  if (!d.has_labels) return Dataset(std::move(impl));
  const hsize_t slab = 1u << 20;
  std::vector<long long> buf;
  for (hsize_t begin = 0; begin < d.n; begin += slab) {
    const hsize_t count = std::min<hsize_t>(slab, d.n - begin);
    buf.resize(count);
    h5::Space fspace(H5Dget_space(y.get()));
    H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &begin, nullptr, &count, nullptr);
    h5::Space mspace(H5Screate_simple(1, &count, nullptr));
    RT_CHECK(H5Dread(y.get(), H5T_NATIVE_LLONG, mspace.get(), fspace.get(), H5P_DEFAULT,
                     buf.data()) >= 0,
             "{}: cannot read labels {}..{}: {} (truncated or corrupt file?)", d.where("y"), begin,
             begin + count, detail::hdf5_error_string());
    for (hsize_t i = 0; i < count; ++i) {
      if (labels == Labels::inspect && (buf[i] < 0 || buf[i] >= d.num_classes)) {
        if (d.out_of_range.count++ < kMaxOutOfRangeListed)
          d.out_of_range.first.emplace_back(begin + i, buf[i]);
        d.labels[begin + i] = 0;
        continue;
      }
      RT_CHECK(buf[i] >= 0 && buf[i] < d.num_classes,
               "{}: label {} at index {} is outside [0, {}) (num_classes = {})", d.where("y"),
               buf[i], begin + i, d.num_classes, d.num_classes);
      d.labels[begin + i] = static_cast<std::int32_t>(buf[i]);
    }
  }
  return Dataset(std::move(impl));
}

Dataset Dataset::open_on_all_ranks(const std::string& path, const std::string& split,
                                   Communicator& control, Labels labels) {
  std::optional<Dataset> ds;
  std::string message;
  if (const FaultPlan* faults = FaultPlan::planned()) faults->stall_at("open", control.rank(), 0);
  try {
    ds.emplace(open(path, split, labels));
  } catch (const Error& e) {
    message = e.what();
  }
  // The highest failing rank, or -1: every rank learns it, so every rank
  // reports. The communicator's --timeout ends the wait when a rank never
  // gets here (stuck on a slow file system, or dead).
  std::int32_t failed_max = message.empty() ? -1 : control.rank();
  const BufferView flag{&failed_max, 1, DType::i32, Device::cpu()};
  control.allreduce(flag, flag, ReduceOp::max);
  if (failed_max >= 0) {
    // Every rank says what the failing rank found: its own path and reason
    // (ranks may be given different files), even where the launcher ends the
    // job before that rank's own message is out.
    const std::string cause = broadcast_text(control, message, failed_max);
    if (!message.empty()) throw Error(message);
    // Said by the failing rank itself, unless it cannot be heard.
    const std::string relay =
        fmt::format("rank {} could not open its data set: {}", failed_max, cause);
    note_relayed_error(relay, cause);
    throw Error(relay);
  }
  return std::move(*ds);
}

std::size_t Dataset::size() const {
  return impl_->n;
}
const std::vector<std::size_t>& Dataset::sample_shape() const {
  return impl_->out_shape;
}
std::size_t Dataset::sample_elements() const {
  return impl_->out_elems;
}
const std::vector<std::size_t>& Dataset::stored_shape() const {
  return impl_->shape;
}
const SampleTransform* Dataset::transform() const {
  return impl_->transform.get();
}

bool Dataset::is_tokens() const {
  return impl_->tokens != nullptr;
}
std::size_t Dataset::labels_per_sample() const {
  return impl_->tokens ? std::max<std::size_t>(impl_->tokens->context(), 1) : 1;
}
std::uint64_t Dataset::token_count() const {
  return impl_->tokens ? impl_->tokens->token_count() : 0;
}
const std::string& Dataset::tokenizer() const {
  static const std::string none;
  return impl_->tokens ? impl_->tokens->tokenizer() : none;
}
std::vector<std::int32_t> Dataset::read_tokens(std::uint64_t begin, std::uint64_t end) {
  RT_CHECK(impl_->tokens, "{}: holds no tokens", impl_->where());
  std::lock_guard scratch_lock(impl_->read_mutex);
  return impl_->tokens->read_tokens(begin, end);
}

void Dataset::set_token_context(std::size_t context, bool keep_partial) {
  Impl& d = *impl_;
  RT_CHECK(d.tokens, "{}: holds samples, not tokens: a context applies to token data only",
           d.where());
  std::lock_guard lock(d.read_mutex);
  d.tokens->set_context(context, keep_partial);
  d.n = d.tokens->windows();
  d.shape = {context};
  d.out_shape = d.shape;
  d.elems = d.out_elems = context;
}

void Dataset::set_transform(std::shared_ptr<const SampleTransform> transform, std::size_t threads) {
  Impl& d = *impl_;
  RT_CHECK(!d.tokens || !transform, "{}: holds tokens; image transforms do not apply", d.where());
  std::lock_guard lock(d.read_mutex);
  d.threads.reset();
  if (!transform) {
    d.transform.reset();
    d.out_shape = d.shape;
    d.out_elems = d.elems;
    return;
  }
  RT_CHECK(d.dtype == SampleDType::u8,
           "{}: {} needs images (uint8 samples, from 'ringtrain convert images'); x is {}",
           d.where("x"), transform->spec(), sample_dtype_name(d.dtype));
  try {
    d.out_shape = transform->output_shape(d.shape);
  } catch (const Error& e) {
    RT_CHECK(false, "{}: {}", d.where("x"), e.what());
  }
  d.out_elems = 1;
  for (std::size_t s : d.out_shape) d.out_elems *= s;
  d.transform = std::move(transform);
  d.threads = std::make_unique<LoaderThreads>(std::max<std::size_t>(1, threads));
}
SampleDType Dataset::stored_dtype() const {
  return impl_->dtype;
}
float Dataset::scale() const {
  return impl_->scale;
}
float Dataset::offset() const {
  return impl_->offset;
}
int Dataset::num_classes() const {
  return impl_->num_classes;
}
const std::vector<std::string>& Dataset::class_names() const {
  return impl_->class_names;
}
const std::string& Dataset::path() const {
  return impl_->path;
}
const std::string& Dataset::split() const {
  return impl_->split;
}
std::string Dataset::describe() const {
  return impl_->where();
}
const std::vector<std::int32_t>& Dataset::labels() const {
  RT_CHECK(!impl_->tokens,
           "{}: token data has a label per token, not per sample (this tool reads classified "
           "samples)",
           impl_->where());
  return impl_->labels;
}
bool Dataset::has_labels() const {
  return impl_->has_labels;
}
const Dataset::OutOfRangeLabels& Dataset::out_of_range_labels() const {
  return impl_->out_of_range;
}
bool Dataset::direct_reads() const {
  return impl_->direct;
}
void Dataset::use_hdf5_reads() {
  impl_->direct = false;
}
bool Dataset::cached() const {
  return impl_->cached;
}
std::size_t Dataset::stored_bytes() const {
  if (impl_->tokens)
    return static_cast<std::size_t>(impl_->tokens->token_count()) * sizeof(std::int32_t);
  if (impl_->encoded) {
    std::lock_guard lock(h5::library_mutex());
    return static_cast<std::size_t>(H5Dget_storage_size(impl_->x.get()));
  }
  return impl_->n * impl_->elems * impl_->stored_size();
}

void Dataset::check_sample_shape(const std::vector<std::size_t>& expected) const {
  RT_CHECK(expected == impl_->out_shape,
           "{}: sample shape {} (x is N x {}) does not match the model's input shape {}",
           impl_->where("x"), shape_string(impl_->out_shape), shape_string(impl_->shape),
           shape_string(expected));
}

namespace {

// Transforms a batch's stored rows into x on the loader threads.
void transform_rows(Dataset::Impl& d, std::span<const std::uint64_t> indices,
                    const unsigned char* const* rows, const ReadOutput& out, std::uint64_t epoch) {
  d.threads->run(indices.size(), [&](std::size_t i) {
    if (out.bytes)
      d.transform->apply_bytes(rows[i], d.shape, epoch, indices[i], out.bytes + i * d.out_elems);
    else
      d.transform->apply(rows[i], d.shape, d.scale, d.offset, epoch, indices[i],
                         out.floats + i * d.out_elems);
  });
}

// Encoded samples: the byte strings of the batch in one H5Dread (a point
// selection keeps the order asked for), decoded and transformed on the loader
// threads. Without a transform every image must have the stored size.
void read_encoded(Dataset::Impl& d, std::span<const std::uint64_t> indices, const ReadOutput& x,
                  std::uint64_t epoch) {
  std::lock_guard scratch_lock(d.read_mutex);
  RT_CHECK(d.out_elems > 0,
           "{}: images of varying size need a transform that ends at a fixed size (--augment or "
           "--eval-transform with a crop or resize((H,W)))",
           d.where("x"));
  const std::size_t count = indices.size();
  std::vector<hvl_t> bytes(count);
  h5::Type vlen(H5Tvlen_create(H5T_NATIVE_UINT8));
  const hsize_t n = count;
  h5::Space mspace(H5Screate_simple(1, &n, nullptr));
  {
    std::lock_guard lock(h5::library_mutex());
    std::vector<hsize_t> coords(indices.begin(), indices.end());
    h5::Space fspace(H5Dget_space(d.x.get()));
    RT_H5_CHECK(H5Sselect_elements(fspace.get(), H5S_SELECT_SET, count, coords.data()),
                d.where("x"));
    RT_CHECK(
        H5Dread(d.x.get(), vlen.get(), mspace.get(), fspace.get(), H5P_DEFAULT, bytes.data()) >= 0,
        "{}: reading {} encoded samples failed: {} (truncated or corrupt file?)", d.where("x"),
        count, detail::hdf5_error_string());
  }
  struct Reclaim {  // HDF5 allocated the strings; give them back whatever happens
    hid_t type, space;
    std::vector<hvl_t>& v;
    ~Reclaim() {
      std::lock_guard lock(h5::library_mutex());
      H5Dvlen_reclaim(type, space, H5P_DEFAULT, v.data());
    }
  } reclaim{vlen.get(), mspace.get(), bytes};
  const int channels = static_cast<int>(d.shape[0]);
  auto one = [&](std::size_t i) {
    thread_local std::vector<std::uint8_t> planes;
    const Image img =
        decode_image(fmt::format("{} sample {}", d.where("x"), indices[i]),
                     static_cast<const std::uint8_t*>(bytes[i].p), bytes[i].len, channels);
    const std::size_t hw = static_cast<std::size_t>(img.height) * img.width;
    planes.resize(hw * channels);
    for (std::size_t p = 0; p < hw; ++p)
      for (int c = 0; c < channels; ++c) planes[c * hw + p] = img.pixels[p * channels + c];
    if (d.transform) {
      const std::vector<std::size_t> shape{static_cast<std::size_t>(channels),
                                           static_cast<std::size_t>(img.height),
                                           static_cast<std::size_t>(img.width)};
      if (x.bytes)
        d.transform->apply_bytes(planes.data(), shape, epoch, indices[i],
                                 x.bytes + i * d.out_elems);
      else
        d.transform->apply(planes.data(), shape, d.scale, d.offset, epoch, indices[i],
                           x.floats + i * d.out_elems);
      return;
    }
    RT_CHECK(static_cast<std::size_t>(img.height) == d.shape[1] &&
                 static_cast<std::size_t>(img.width) == d.shape[2],
             "{}: sample {} decodes to {}x{}, not the stored {}x{}", d.where("x"), indices[i],
             img.height, img.width, d.shape[1], d.shape[2]);
    if (x.bytes)
      std::memcpy(x.bytes + i * d.out_elems, planes.data(), planes.size());
    else
      bytes_to_float(planes.data(), x.floats + i * d.out_elems, planes.size(), d.scale, d.offset);
  };
  if (d.threads)
    d.threads->run(count, one);
  else
    for (std::size_t i = 0; i < count; ++i) one(i);
}

}  // namespace

namespace {
void read_into(Dataset::Impl& d, std::span<const std::uint64_t> indices, const ReadOutput& x,
               std::int32_t* y, std::uint64_t epoch);
}  // namespace

void Dataset::read(std::span<const std::uint64_t> indices, float* x, std::int32_t* y,
                   std::uint64_t epoch) {
  read_into(*impl_, indices, ReadOutput{x, nullptr}, y, epoch);
}

bool Dataset::reads_bytes() const {
  return impl_->dtype == SampleDType::u8 || impl_->encoded;
}

void Dataset::read_bytes(std::span<const std::uint64_t> indices, std::uint8_t* x, std::int32_t* y,
                         std::uint64_t epoch) {
  RT_CHECK(reads_bytes(), "{}: float32 samples have no bytes to read", impl_->where("x"));
  read_into(*impl_, indices, ReadOutput{nullptr, x}, y, epoch);
}

Dataset::ByteWidening Dataset::byte_widening() const {
  const Impl& d = *impl_;
  ByteWidening w;
  if (d.transform) {
    // A transform's output is C x H x W, normalised per channel.
    w.plane = d.out_shape.size() == 3 ? d.out_shape[1] * d.out_shape[2] : d.out_elems;
    d.transform->widening(d.out_shape.size() == 3 ? d.out_shape[0] : 1, d.scale, d.offset, w.scale,
                          w.offset);
  } else {
    // One scale and offset for the whole sample.
    w.plane = d.out_elems;
    w.scale = {d.scale};
    w.offset = {d.offset};
  }
  return w;
}

namespace {
void read_rows(Dataset::Impl& d, std::span<const std::uint64_t> indices, const ReadOutput& x,
               std::int32_t* y, std::uint64_t epoch);

// Float32 samples are checked as they are read: a NaN or Inf in the data
// would otherwise surface steps later as "non-finite gradients" (a runtime
// failure, exit 3, which a restarting wrapper retries) far from its cause.
// Bad data is bad input (exit 2), named by its sample. (Bytes are finite.)
void check_finite(const Dataset::Impl& d, std::span<const std::uint64_t> indices, const float* x) {
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const float* row = x + i * d.out_elems;
    // x * 0 is 0 for every finite x, NaN for NaN and Inf: one sum, no branch.
    float poison = 0.f;
    for (std::size_t e = 0; e < d.out_elems; ++e) poison += row[e] * 0.f;
    if (poison == 0.f) continue;
    std::size_t e = 0;
    while (e + 1 < d.out_elems && std::isfinite(row[e])) ++e;
    throw InputError(fmt::format(
        "{}: sample {} holds a non-finite value ({} at element {}): the data is bad, not the "
        "training; 'ringtrain data check --data {}' lists every such sample",
        d.where("x"), indices[i], row[e], e, d.path));
  }
}

void read_into(Dataset::Impl& d, std::span<const std::uint64_t> indices, const ReadOutput& x,
               std::int32_t* y, std::uint64_t epoch) {
  read_rows(d, indices, x, y, epoch);
  if (x.floats != nullptr && d.dtype == SampleDType::f32 && !d.tokens)
    check_finite(d, indices, x.floats);
}

void read_rows(Dataset::Impl& d, std::span<const std::uint64_t> indices, const ReadOutput& x,
               std::int32_t* y, std::uint64_t epoch) {
  const std::size_t count = indices.size();
  if (count == 0) return;
  if (d.tokens) {
    RT_CHECK(x.floats != nullptr, "{}: token windows are read as floats, not bytes",
             d.where("tokens"));
    std::lock_guard scratch_lock(d.read_mutex);
    d.tokens->read(indices, x.floats, y);
    return;
  }
  for (std::size_t i = 0; i < count; ++i)
    RT_CHECK(indices[i] < d.n, "{}: sample index {} out of range (N = {})", d.where("x"),
             indices[i], d.n);
  if (y)
    for (std::size_t i = 0; i < count; ++i) y[i] = d.labels[indices[i]];
  if (d.encoded) {
    read_encoded(d, indices, x, epoch);
    return;
  }
  const std::size_t row_bytes = d.elems * d.stored_size();
  if (d.cached && d.transform) {
    std::lock_guard threads_lock(d.read_mutex);  // one batch at a time on the threads
    std::vector<const unsigned char*> rows(count);
    for (std::size_t i = 0; i < count; ++i) rows[i] = d.cache.data() + indices[i] * row_bytes;
    transform_rows(d, indices, rows.data(), x, epoch);
    return;
  }
  if (d.cached) {
    // Rows are random in memory, so the loads miss; fetching the next rows'
    // lines while this one converts hides most of that latency.
    constexpr std::size_t kAhead = 2;
    auto row = [&](std::size_t i) { return d.cache.data() + indices[i] * row_bytes; };
    for (std::size_t i = 0; i < std::min(count, kAhead); ++i)
      for (std::size_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(row(i) + b);
    for (std::size_t i = 0; i < count; ++i) {
      if (i + kAhead < count)
        for (std::size_t b = 0; b < row_bytes; b += 64) __builtin_prefetch(row(i + kAhead) + b);
      d.emit_row(row(i), x, i);
    }
    return;
  }

  std::lock_guard scratch_lock(d.read_mutex);
  // Sort (index, position), read each distinct index once, in file order.
  d.order.resize(count);
  for (std::size_t i = 0; i < count; ++i) d.order[i] = {indices[i], i};
  std::sort(d.order.begin(), d.order.end());
  d.slot_of.resize(count);
  std::size_t unique = 0;
  for (std::size_t i = 0; i < count; ++i) {
    if (i > 0 && d.order[i].first != d.order[i - 1].first) ++unique;
    d.slot_of[d.order[i].second] = unique;
  }
  ++unique;
  d.staging.resize(unique * row_bytes);

  if (d.direct) {
    // One pread per run of consecutive indices within one chunk.
    std::size_t slot = 0;
    for (std::size_t i = 0; i < count;) {
      const std::uint64_t first = d.order[i].first;
      const std::size_t c = static_cast<std::size_t>(first / d.rows_per_chunk);
      const std::uint64_t chunk_end = std::min<std::uint64_t>((c + 1) * d.rows_per_chunk, d.n);
      std::size_t j = i + 1;
      std::uint64_t last = first;
      while (j < count && d.order[j].first <= last + 1 && d.order[j].first < chunk_end)
        last = d.order[j++].first;
      const std::size_t rows = static_cast<std::size_t>(last - first + 1);
      const std::uint64_t at = chunk_address(d, c) + (first - c * d.rows_per_chunk) * row_bytes;
      pread_fully(d, d.staging.data() + slot * row_bytes, rows * row_bytes, at, first);
      slot += rows;
      i = j;
    }
  } else {
    std::lock_guard lock(h5::library_mutex());
    h5::Space fspace(H5Dget_space(d.x.get()));
    std::array<hsize_t, H5S_MAX_RANK> start{}, block{};
    for (std::size_t k = 0; k < d.shape.size(); ++k) block[k + 1] = d.shape[k];
    // One read per run of consecutive indices, with the memory space shaped
    // like the run: HDF5 then copies whole rows out of each chunk. (One OR-ed
    // selection with a flat memory space makes HDF5 map every element on its
    // own, which is many times slower.)
    std::size_t slot = 0;
    for (std::size_t i = 0; i < count;) {
      std::size_t j = i + 1;
      std::uint64_t last = d.order[i].first;
      while (j < count && d.order[j].first <= last + 1) last = d.order[j++].first;
      start[0] = d.order[i].first;
      block[0] = last - d.order[i].first + 1;
      RT_H5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr,
                                      block.data(), nullptr),
                  d.where("x"));
      h5::Space mspace(
          H5Screate_simple(static_cast<int>(d.shape.size() + 1), block.data(), nullptr));
      RT_CHECK(H5Dread(d.x.get(), d.mem_type(), mspace.get(), fspace.get(), H5P_DEFAULT,
                       d.staging.data() + slot * row_bytes) >= 0,
               "{}: reading samples {}..{} failed: {} (truncated or corrupt file?)", d.where("x"),
               start[0], last + 1, detail::hdf5_error_string());
      slot += block[0];
      i = j;
    }
  }
  if (d.transform) {
    d.rows.resize(count);
    for (std::size_t i = 0; i < count; ++i) d.rows[i] = d.staging.data() + d.slot_of[i] * row_bytes;
    transform_rows(d, indices, d.rows.data(), x, epoch);
    return;
  }
  for (std::size_t i = 0; i < count; ++i)
    d.emit_row(d.staging.data() + d.slot_of[i] * row_bytes, x, i);
}
}  // namespace

void Dataset::read_stored(std::uint64_t begin, std::uint64_t end, void* out) {
  Impl& d = *impl_;
  RT_CHECK(!d.tokens, "{}: holds tokens; read() gives their windows", d.where());
  RT_CHECK(!d.encoded, "{}: holds encoded images; read() decodes them", d.where("x"));
  RT_CHECK(begin <= end && end <= d.n, "{}: sample range [{}, {}) out of range (N = {})",
           d.where("x"), begin, end, d.n);
  if (begin == end) return;
  if (d.cached) {
    const std::size_t row_bytes = d.elems * d.stored_size();
    std::memcpy(out, d.cache.data() + begin * row_bytes, (end - begin) * row_bytes);
    return;
  }
  std::lock_guard lock(h5::library_mutex());
  h5::Space fspace(H5Dget_space(d.x.get()));
  const std::size_t rank = d.shape.size() + 1;
  std::array<hsize_t, H5S_MAX_RANK> start{}, block{};
  start[0] = begin;
  block[0] = end - begin;
  for (std::size_t k = 0; k < d.shape.size(); ++k) block[k + 1] = d.shape[k];
  RT_H5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, block.data(),
                                  nullptr),
              d.where("x"));
  // Memory shaped like the selection, so HDF5 maps whole blocks to chunks.
  h5::Space mspace(H5Screate_simple(static_cast<int>(rank), block.data(), nullptr));
  RT_CHECK(H5Dread(d.x.get(), d.mem_type(), mspace.get(), fspace.get(), H5P_DEFAULT, out) >= 0,
           "{}: reading samples {}..{} failed: {} (truncated or corrupt file?)", d.where("x"),
           begin, end, detail::hdf5_error_string());
}

bool Dataset::enable_cache(std::size_t budget_bytes, int ranks_on_node) {
  Impl& d = *impl_;
  if (d.cached) return true;
  if (d.tokens) {
    log_warn("--cache: {} holds tokens, read by window from the file (the page cache keeps them)",
             d.where());
    return false;
  }
  if (d.encoded) {
    log_warn("--cache: {} holds encoded images, read from the file (the page cache keeps them)",
             d.where("x"));
    return false;
  }
  const std::size_t need = stored_bytes();
  std::size_t budget = budget_bytes;
  if (budget == 0)
    budget = available_memory_bytes() / 2 / static_cast<std::size_t>(std::max(1, ranks_on_node));
  if (need > budget) {
    log_warn(
        "--cache: {} needs {:.1f} MiB but this rank's budget is {:.1f} MiB: reading from the file",
        d.where("x"), need / 1048576.0, budget / 1048576.0);
    return false;
  }
  std::vector<unsigned char> cache(need);
  // In slabs of ~64 MiB, so a failure names the range and memory is not doubled.
  const std::size_t row_bytes = d.elems * d.stored_size();
  const std::size_t rows = std::max<std::size_t>(1, (64u << 20) / row_bytes);
  for (std::size_t b = 0; b < d.n; b += rows)
    read_stored(b, std::min(d.n, b + rows), cache.data() + b * row_bytes);
  d.cache = std::move(cache);
  d.cached = true;
  return true;
}

}  // namespace ringtrain
