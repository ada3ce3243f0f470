// The tfevents format, checked byte by byte here: CRC-32C against published
// test vectors, record framing, and the protobuf fields decoded back. The
// tensorboard package itself loads the files in tensorboard_check.py.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "ringtrain/core/error.h"
#include "ringtrain/train/tensorboard_writer.h"
#include "tests/support/read_file.h"
#include "tests/support/temp_dir.h"

using namespace ringtrain;
namespace fs = std::filesystem;
using ringtrain::test::slurp;
using ringtrain::test::TempDir;

namespace {

std::uint64_t le(const std::string& s, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= std::uint64_t{static_cast<unsigned char>(s.at(at + static_cast<std::size_t>(i)))}
         << (8 * i);
  return v;
}

// A minimal protobuf reader, enough to decode what the writer produces.
struct Reader {
  std::string_view s;
  std::size_t pos = 0;
  bool done() const { return pos >= s.size(); }
  std::uint64_t varint() {
    std::uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      const auto b = static_cast<unsigned char>(s.at(pos++));
      v |= std::uint64_t{b & 0x7Fu} << shift;
      if (!(b & 0x80)) return v;
    }
  }
  std::uint64_t fixed(int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i)
      v |= std::uint64_t{static_cast<unsigned char>(s.at(pos++))} << (8 * i);
    return v;
  }
  std::string_view bytes() {
    const auto n = static_cast<std::size_t>(varint());
    std::string_view out = s.substr(pos, n);
    REQUIRE(out.size() == n);
    pos += n;
    return out;
  }
};

struct DecodedEvent {
  double wall_time = 0;
  std::uint64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;
  std::uint64_t session_status = 0;
};

DecodedEvent decode_event(std::string_view bytes) {
  DecodedEvent e;
  Reader r{bytes};
  while (!r.done()) {
    const std::uint64_t key = r.varint();
    const auto field = key >> 3;
    const auto type = key & 7;
    if (field == 1 && type == 1) {
      const std::uint64_t bits = r.fixed(8);
      std::memcpy(&e.wall_time, &bits, 8);
    } else if (field == 2 && type == 0) {
      e.step = r.varint();
    } else if (field == 3 && type == 2) {
      e.file_version = std::string(r.bytes());
    } else if (field == 5 && type == 2) {
      Reader summary{r.bytes()};
      while (!summary.done()) {
        REQUIRE(summary.varint() == ((1u << 3) | 2u));
        Reader value{summary.bytes()};
        std::string tag;
        float v = NAN;
        while (!value.done()) {
          const std::uint64_t k = value.varint();
          if (k == ((1u << 3) | 2u)) {
            tag = std::string(value.bytes());
          } else {
            REQUIRE(k == ((2u << 3) | 5u));
            const auto bits = static_cast<std::uint32_t>(value.fixed(4));
            std::memcpy(&v, &bits, 4);
          }
        }
        e.values.emplace_back(tag, v);
      }
    } else if (field == 7 && type == 2) {
      Reader log{r.bytes()};
      REQUIRE(log.varint() == ((1u << 3) | 0u));
      e.session_status = log.varint();
    } else {
      FAIL("unexpected field " << field << " wire type " << type);
    }
  }
  return e;
}

// Splits a file into records, checking both CRCs of each.
std::vector<DecodedEvent> read_events(const fs::path& file) {
  const std::string s = slurp(file);
  std::vector<DecodedEvent> out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    REQUIRE(pos + 12 <= s.size());
    const std::uint64_t len = le(s, pos, 8);
    CHECK(le(s, pos + 8, 4) == masked_crc32c(s.data() + pos, 8));
    REQUIRE(pos + 12 + len + 4 <= s.size());
    const std::string_view payload(s.data() + pos + 12, static_cast<std::size_t>(len));
    CHECK(le(s, pos + 12 + len, 4) == masked_crc32c(payload.data(), payload.size()));
    out.push_back(decode_event(payload));
    pos += 12 + static_cast<std::size_t>(len) + 4;
  }
  return out;
}

std::vector<fs::path> event_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("crc32c matches the published test vectors") {
  // RFC 3720 appendix B.4 and the classic check value.
  const std::string check = "123456789";
  CHECK(crc32c(check.data(), check.size()) == 0xE3069283u);
  std::vector<unsigned char> buf(32, 0x00);
  CHECK(crc32c(buf.data(), buf.size()) == 0x8A9136AAu);
  std::fill(buf.begin(), buf.end(), 0xFF);
  CHECK(crc32c(buf.data(), buf.size()) == 0x62A8AB43u);
  for (int i = 0; i < 32; ++i) buf[static_cast<std::size_t>(i)] = static_cast<unsigned char>(i);
  CHECK(crc32c(buf.data(), buf.size()) == 0x46DD794Eu);
  for (int i = 0; i < 32; ++i)
    buf[static_cast<std::size_t>(i)] = static_cast<unsigned char>(31 - i);
  CHECK(crc32c(buf.data(), buf.size()) == 0x113FDB5Cu);
  CHECK(crc32c(nullptr, 0) == 0u);
  // Masking: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
  const std::uint32_t c = 0xE3069283u;
  CHECK(masked_crc32c(check.data(), check.size()) ==
        static_cast<std::uint32_t>(((c >> 15) | (c << 17)) + 0xa282ead8u));
}

TEST_CASE("record framing puts the length and both masked CRCs around the payload") {
  const std::string payload("\x09\x00\x00\x00\x00\x00\x00\xf0\x3f", 9);  // wall_time = 1.0
  const std::string rec = tfevents::frame_record(std::string_view(payload.data(), 9));
  REQUIRE(rec.size() == 8 + 4 + 9 + 4);
  CHECK(le(rec, 0, 8) == 9);
  CHECK(le(rec, 8, 4) == masked_crc32c(rec.data(), 8));
  CHECK(rec.substr(12, 9) == std::string(payload.data(), 9));
  CHECK(le(rec, 21, 4) == masked_crc32c(payload.data(), 9));
  CHECK(decode_event(std::string_view(payload.data(), 9)).wall_time == 1.0);
}

TEST_CASE("events encode wall time, step, file version, scalars and session start") {
  auto e = decode_event(tfevents::file_version_event(1700000000.25));
  CHECK(e.wall_time == 1700000000.25);
  CHECK(e.step == 0);
  CHECK(e.file_version == "brain.Event:2");

  // Steps that need 1, 2, 5 and 9 varint bytes.
  for (std::uint64_t step :
       {std::uint64_t{1}, std::uint64_t{127}, std::uint64_t{128}, std::uint64_t{300},
        std::uint64_t{1} << 32, std::uint64_t{INT64_MAX}}) {
    e = decode_event(
        tfevents::scalars_event(12.5, step, {{"loss", 0.125}, {"train/lr", -3e-4}, {"nan", NAN}}));
    CHECK(e.step == step);
    CHECK(e.wall_time == 12.5);
    REQUIRE(e.values.size() == 3);
    CHECK(e.values[0] == std::pair<std::string, float>{"loss", 0.125f});
    CHECK(e.values[1] == std::pair<std::string, float>{"train/lr", -3e-4f});
    CHECK(e.values[2].first == "nan");
    CHECK(std::isnan(e.values[2].second));
  }
  CHECK_THROWS_AS(tfevents::scalars_event(1, std::uint64_t{INT64_MAX} + 1, {{"x", 1}}), Error);
  CHECK_THROWS_AS(tfevents::scalars_event(1, 1, {{"", 1}}), Error);

  e = decode_event(tfevents::session_start_event(3.0, 42));
  CHECK(e.session_status == 1);
  CHECK(e.step == 42);
  // A long tag needs a multi-byte length.
  const std::string long_tag(300, 't');
  e = decode_event(tfevents::scalars_event(1, 1, {{long_tag, 2.0}}));
  CHECK(e.values.at(0).first == long_tag);
}

TEST_CASE("the writer creates a named event file that starts with file_version") {
  TempDir dir("tb-writer", /*create=*/false);
  const fs::path logdir = dir.path / "run1";
  std::string first_path;
  {
    TensorBoardWriter tb(logdir.string());
    first_path = tb.path();
    tb.add_scalar("loss", 1, 2.5);
    tb.add_scalars(2, {{"loss", 1.5}, {"accuracy", 0.75}});
    tb.add_scalars(3, {});  // nothing to write
    // Flushed per call: complete records are on disk before the writer closes.
    CHECK(read_events(tb.path()).size() == 3);
  }
  const std::string name = fs::path(first_path).filename().string();
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  CHECK(name.rfind("events.out.tfevents.", 0) == 0);
  CHECK_THAT(name, Catch::EndsWith(fmt::format(".{}.{}.ringtrain", host, ::getpid())));

  const auto events = read_events(first_path);
  REQUIRE(events.size() == 3);
  CHECK(events[0].file_version == "brain.Event:2");
  CHECK(events[1].step == 1);
  CHECK(events[1].values == std::vector<std::pair<std::string, float>>{{"loss", 2.5f}});
  CHECK(events[2].values.size() == 2);
  CHECK(std::abs(events[2].wall_time - static_cast<double>(std::time(nullptr))) < 60);

  // A second writer in the same directory never overwrites the first, and a
  // resumed one opens with SessionLog START at the step after the checkpoint.
  {
    TensorBoardWriter tb(logdir.string(), std::uint64_t{7});
    CHECK(tb.path() != first_path);
    tb.add_scalar("loss", 8, 0.5);
  }
  const auto files = event_files(logdir);
  REQUIRE(files.size() == 2);
  CHECK(files[0].string() == first_path);  // sorts first: TensorBoard reads in name order
  const auto resumed = read_events(files[1]);
  REQUIRE(resumed.size() == 3);
  CHECK(resumed[0].file_version == "brain.Event:2");
  CHECK(resumed[1].session_status == 1);
  CHECK(resumed[1].step == 8);
  CHECK(resumed[2].step == 8);
}

TEST_CASE("an unusable log directory is a clear error") {
  TempDir dir("tb-bad", /*create=*/false);
  fs::create_directories(dir.path);
  std::ofstream(dir.path / "file") << "x";
  CHECK_THROWS_WITH(TensorBoardWriter((dir.path / "file").string()), Catch::Contains("file"));
}
