// TensorBoard event files, written directly in the tfevents format so that
// neither TensorFlow nor protobuf is a dependency:
//
//   file   = record*
//   record = uint64 length | uint32 masked_crc32c(length bytes)
//          | length bytes of a serialized tensorflow.Event
//          | uint32 masked_crc32c(those bytes)            (all little-endian)
//
// Event (tensorflow/core/util/event.proto), only the fields used here:
//   1 wall_time   double           2 step  int64
//   3 file_version string          5 summary Summary { 1 value Value {1 tag string, 2 simple_value
//   float} } 7 session_log SessionLog { 1 status enum (START = 1) }   (6 is the deprecated
//   log_message)
// The first record of every file is file_version "brain.Event:2".
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ringtrain {

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), as the tfevents
// format uses, and its "masked" form ((crc >> 15 | crc << 17) + 0xa282ead8).
std::uint32_t crc32c(const void* data, std::size_t size);
std::uint32_t masked_crc32c(const void* data, std::size_t size);

class TensorBoardWriter {
 public:
  // Creates `logdir` and the file events.out.tfevents.<unix_time>.<host>.<pid>.ringtrain
  // in it, and writes the file_version record. A resumed run passes the step
  // of its checkpoint: a SessionLog START at resume_step + 1 makes TensorBoard
  // discard the points an interrupted run logged after that checkpoint, as
  // TensorFlow's own writer does after a restore.
  explicit TensorBoardWriter(const std::string& logdir,
                             std::optional<std::uint64_t> resume_step = std::nullopt);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // One scalar, or several in one event; each call is flushed to disk so that
  // a running TensorBoard picks it up. Thread-safe.
  void add_scalar(const std::string& tag, std::uint64_t step, double value);
  void add_scalars(std::uint64_t step, const std::vector<std::pair<std::string, double>>& values);

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& event_bytes);

  std::string path_;
  std::FILE* file_ = nullptr;
  std::mutex mutex_;
};

// The serialized Event payloads, exposed for tests and tools.
namespace tfevents {
std::string file_version_event(double wall_time);
std::string scalars_event(double wall_time, std::uint64_t step,
                          const std::vector<std::pair<std::string, double>>& values);
std::string session_start_event(double wall_time, std::uint64_t step);
// A complete record (length, CRCs, payload) around `event_bytes`.
std::string frame_record(std::string_view event_bytes);
}  // namespace tfevents

}  // namespace ringtrain
