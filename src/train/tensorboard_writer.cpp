// tfevents writer: the record framing and the few protobuf fields are
// hand-encoded (see include/ringtrain/train/tensorboard_writer.h).
#include "ringtrain/train/tensorboard_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "ringtrain/core/check.h"

namespace ringtrain {

namespace fs = std::filesystem;

// ---------------------------------------------------------------------------
// CRC-32C, byte-at-a-time from a table built at compile time. Records are
// small (tens of bytes per scalar), so a faster CRC would buy nothing.
// ---------------------------------------------------------------------------
namespace {

constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    table[i] = c;
  }
  return table;
}
constexpr auto kCrc32cTable = make_crc32c_table();

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) crc = kCrc32cTable[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(const void* data, std::size_t size) {
  const std::uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

// ---------------------------------------------------------------------------
// Protobuf wire format: key = field << 3 | wire type; varints are 7 bits per
// byte, low group first; fixed-width fields are little-endian.
// ---------------------------------------------------------------------------
namespace {

enum WireType : std::uint32_t { kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5 };

void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, std::uint32_t field, WireType type) {
  put_varint(out, (field << 3) | type);
}

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void put_double(std::string& out, std::uint32_t field, double v) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed64);
  put_le(out, bits, 8);
}

void put_float(std::string& out, std::uint32_t field, float v) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, kFixed32);
  put_le(out, bits, 4);
}

void put_bytes(std::string& out, std::uint32_t field, std::string_view bytes) {
  put_key(out, field, kLengthDelimited);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_int64(std::string& out, std::uint32_t field, std::uint64_t v) {
  put_key(out, field, kVarint);
  put_varint(out, v);
}

// Event fields.
constexpr std::uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3,
                        kEventSummary = 5, kEventSessionLog = 7;
constexpr std::uint32_t kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;
constexpr std::uint32_t kSessionLogStatus = 1, kSessionLogStart = 1;

std::string event_header(double wall_time, std::uint64_t step) {
  RT_CHECK(step <= static_cast<std::uint64_t>(INT64_MAX),
           "tensorboard: step {} does not fit an int64", step);
  std::string e;
  put_double(e, kEventWallTime, wall_time);
  if (step != 0) put_int64(e, kEventStep, step);  // proto3 omits defaults
  return e;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

}  // namespace

namespace tfevents {

std::string file_version_event(double wall_time) {
  std::string e = event_header(wall_time, 0);
  put_bytes(e, kEventFileVersion, "brain.Event:2");
  return e;
}

std::string scalars_event(double wall_time, std::uint64_t step,
                          const std::vector<std::pair<std::string, double>>& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    RT_CHECK(!tag.empty(), "tensorboard: empty scalar tag at step {}", step);
    std::string v;
    put_bytes(v, kValueTag, tag);
    put_float(v, kValueSimpleValue, static_cast<float>(value));
    put_bytes(summary, kSummaryValue, v);
  }
  std::string e = event_header(wall_time, step);
  put_bytes(e, kEventSummary, summary);
  return e;
}

std::string session_start_event(double wall_time, std::uint64_t step) {
  std::string log;
  put_key(log, kSessionLogStatus, kVarint);
  put_varint(log, kSessionLogStart);
  std::string e = event_header(wall_time, step);
  put_bytes(e, kEventSessionLog, log);
  return e;
}

std::string frame_record(std::string_view event_bytes) {
  std::string rec;
  rec.reserve(event_bytes.size() + 16);
  put_le(rec, event_bytes.size(), 8);
  put_le(rec, masked_crc32c(rec.data(), 8), 4);
  rec.append(event_bytes);
  put_le(rec, masked_crc32c(event_bytes.data(), event_bytes.size()), 4);
  return rec;
}

}  // namespace tfevents

// ---------------------------------------------------------------------------
// The writer.
// ---------------------------------------------------------------------------

TensorBoardWriter::TensorBoardWriter(const std::string& logdir,
                                     std::optional<std::uint64_t> resume_step) {
  RT_CHECK(!logdir.empty(), "tensorboard: empty log directory");
  std::error_code ec;
  fs::create_directories(logdir, ec);
  RT_CHECK(!ec, "tensorboard: cannot create log directory {}: {}", logdir, ec.message());

  // TensorBoard reads a directory's event files in name order; a second writer
  // in the same second and process gets a numbered suffix, which sorts after.
  const std::string base =
      (fs::path(logdir) / fmt::format("events.out.tfevents.{}.{}.{}.ringtrain",
                                      static_cast<long long>(std::time(nullptr)), host_name(),
                                      ::getpid()))
          .string();
  for (int n = 0; n < 1000 && !file_; ++n) {
    path_ = n == 0 ? base : fmt::format("{}.{}", base, n);
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      RT_CHECK(errno == EEXIST, "tensorboard: cannot create {}: {}", path_, std::strerror(errno));
      continue;
    }
    file_ = ::fdopen(fd, "wb");
    RT_CHECK(file_ != nullptr, "tensorboard: cannot open {}: {}", path_, std::strerror(errno));
  }
  RT_CHECK(file_ != nullptr, "tensorboard: no free event file name in {}", logdir);

  write_record(tfevents::file_version_event(unix_now()));
  if (resume_step) write_record(tfevents::session_start_event(unix_now(), *resume_step + 1));
}

TensorBoardWriter::~TensorBoardWriter() {
  if (file_) std::fclose(file_);
}

void TensorBoardWriter::add_scalar(const std::string& tag, std::uint64_t step, double value) {
  add_scalars(step, {{tag, value}});
}

void TensorBoardWriter::add_scalars(std::uint64_t step,
                                    const std::vector<std::pair<std::string, double>>& values) {
  if (values.empty()) return;
  write_record(tfevents::scalars_event(unix_now(), step, values));
}

void TensorBoardWriter::write_record(const std::string& event_bytes) {
  const std::string rec = tfevents::frame_record(event_bytes);
  std::lock_guard lock(mutex_);
  const std::size_t written = std::fwrite(rec.data(), 1, rec.size(), file_);
  const bool flushed = std::fflush(file_) == 0;
  RT_CHECK(written == rec.size() && flushed, "tensorboard: cannot write to {}: {}", path_,
           std::strerror(errno));
}

}  // namespace ringtrain
