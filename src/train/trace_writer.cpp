#include "ringtrain/train/trace_writer.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/core/timer.h"

namespace ringtrain {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Fixed ids for the lanes the trainer uses, so every rank shows them in the
// same order; any other lane gets an id in order of first use.
constexpr std::pair<std::string_view, int> kKnownLanes[] = {
    {"data", 1}, {"compute", 2}, {"comm", 3}, {"optimizer", 4}, {"eval", 5}, {"checkpoint", 6}};
constexpr int kFirstOtherLane = 100;

std::int64_t unix_now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ts and dur are microseconds; keeping nanoseconds as three decimals lets a
// merge shift them back in integer nanoseconds, so nesting survives exactly.
double ns_to_us(std::int64_t ns) {
  return static_cast<double>(ns) / 1000.0;
}
std::int64_t us_to_ns(double us) {
  return std::llround(us * 1000.0);
}

void write_text_file(const std::string& path, const std::string& text, const char* what) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    RT_CHECK(out.good(), "trace: cannot create {} ({}): {}", tmp, what, std::strerror(errno));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out.good()) {
      const int err = errno;
      std::error_code ignored;
      fs::remove(tmp, ignored);  // a failed run leaves no temporary
      RT_CHECK(false, "trace: cannot write {} ({}): {}", tmp, what, std::strerror(err));
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    RT_CHECK(false, "trace: cannot rename {} to {}: {}", tmp, path, ec.message());
  }
}

}  // namespace

TraceWriter::TraceWriter(int rank, bool enabled, std::size_t max_events)
    : rank_(rank),
      enabled_(enabled),
      max_events_(max_events),
      origin_s_(monotonic_seconds()),
      origin_unix_us_(unix_now_us()) {
  RT_CHECK(rank >= 0, "trace: rank must be >= 0, got {}", rank);
}

int TraceWriter::lane_id(std::string_view lane) {
  if (auto it = lanes_.find(lane); it != lanes_.end()) return it->second;
  int id = 0;
  for (const auto& [name, known] : kKnownLanes)
    if (name == lane) id = known;
  if (id == 0) {
    id = kFirstOtherLane;
    for (const auto& [name, used] : lanes_) id = std::max(id, used + 1);
  }
  lanes_.emplace(std::string(lane), id);
  return id;
}

void TraceWriter::span(std::string_view name, std::string_view lane, double start_s, double end_s,
                       const json& args) {
  if (!enabled_) return;
  RT_CHECK(std::isfinite(start_s) && std::isfinite(end_s) && end_s >= start_s,
           "trace: span '{}' on lane '{}' ends ({}) before it starts ({})", name, lane, end_s,
           start_s);
  RT_CHECK(args.is_null() || args.is_object(), "trace: args of span '{}' must be a JSON object",
           name);
  const std::int64_t start_ns = std::llround((start_s - origin_s_) * 1e9);
  const std::int64_t end_ns = std::llround((end_s - origin_s_) * 1e9);
  std::lock_guard lock(mutex_);
  if (events_.size() >= max_events_) {
    if (dropped_++ == 0)
      log_warn("trace: {} spans recorded, dropping further ones (the trace ends early)",
               max_events_);
    return;
  }
  events_.push_back({std::string(name), lane_id(lane), start_ns, end_ns - start_ns, args});
}

TraceWriter::Scope::Scope(TraceWriter* writer, std::string name, std::string lane, json args)
    : writer_(writer),
      name_(std::move(name)),
      lane_(std::move(lane)),
      args_(std::move(args)),
      start_s_(monotonic_seconds()) {}

TraceWriter::Scope::Scope(Scope&& other) noexcept
    : writer_(std::exchange(other.writer_, nullptr)),
      name_(std::move(other.name_)),
      lane_(std::move(other.lane_)),
      args_(std::move(other.args_)),
      start_s_(other.start_s_) {}

void TraceWriter::Scope::end() {
  if (!writer_) return;
  TraceWriter* w = std::exchange(writer_, nullptr);
  w->span(name_, lane_, start_s_, std::max(start_s_, monotonic_seconds()), args_);
}

TraceWriter::Scope::~Scope() {
  try {
    end();
  } catch (...) {
    // A destructor must not throw; a span that cannot be recorded is lost.
  }
}

TraceWriter::Scope TraceWriter::scope(std::string name, std::string lane, json args) {
  return Scope(enabled_ ? this : nullptr, std::move(name), std::move(lane), std::move(args));
}

std::size_t TraceWriter::event_count() const {
  std::lock_guard lock(mutex_);
  return events_.size();
}

std::size_t TraceWriter::dropped_count() const {
  std::lock_guard lock(mutex_);
  return dropped_;
}

std::string TraceWriter::serialize() const {
  std::lock_guard lock(mutex_);
  json events = json::array();
  // Metadata first: names and order of the rank's row and its lanes.
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", rank_},
                    {"tid", 0},
                    {"args", {{"name", fmt::format("rank {}", rank_)}}}});
  events.push_back({{"name", "process_sort_index"},
                    {"ph", "M"},
                    {"pid", rank_},
                    {"tid", 0},
                    {"args", {{"sort_index", rank_}}}});
  for (const auto& [lane, tid] : lanes_) {
    events.push_back({{"name", "thread_name"},
                      {"ph", "M"},
                      {"pid", rank_},
                      {"tid", tid},
                      {"args", {{"name", lane}}}});
    events.push_back({{"name", "thread_sort_index"},
                      {"ph", "M"},
                      {"pid", rank_},
                      {"tid", tid},
                      {"args", {{"sort_index", tid}}}});
  }
  for (const auto& e : events_) {
    json ev = {
        {"name", e.name}, {"ph", "X"},   {"ts", ns_to_us(e.start_ns)}, {"dur", ns_to_us(e.dur_ns)},
        {"pid", rank_},   {"tid", e.tid}};
    if (!e.args.is_null()) ev["args"] = e.args;
    events.push_back(std::move(ev));
  }
  const json doc = {{"traceEvents", std::move(events)},
                    {"displayTimeUnit", "ms"},
                    {"otherData",
                     {{"ringtrain_rank", rank_},
                      {"clock_origin_unix_us", origin_unix_us_},
                      {"dropped_events", dropped_}}}};
  return doc.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string TraceWriter::rank_file_path(const std::string& path, int rank) {
  return fmt::format("{}.rank-{}.json", path, rank);
}

void TraceWriter::write_rank_file(const std::string& path) const {
  const std::string file = rank_file_path(path, rank_);
  const fs::path parent = fs::path(file).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    RT_CHECK(!ec, "trace: cannot create directory {}: {}", parent.string(), ec.message());
  }
  write_text_file(file, serialize(), "this rank's trace");
}

std::string merge_traces(const std::vector<std::string>& rank_documents) {
  std::vector<json> docs;
  std::int64_t origin = std::numeric_limits<std::int64_t>::max();
  std::size_t dropped = 0;
  for (std::size_t i = 0; i < rank_documents.size(); ++i) {
    json doc = json::parse(rank_documents[i], nullptr, /*allow_exceptions=*/false);
    RT_CHECK(!doc.is_discarded() && doc.is_object() && doc.contains("traceEvents") &&
                 doc["traceEvents"].is_array(),
             "trace: document {} of {} is not a Chrome trace", i, rank_documents.size());
    const json other = doc.value("otherData", json::object());
    RT_CHECK(other.contains("clock_origin_unix_us"),
             "trace: document {} of {} has no clock origin (not written by TraceWriter)", i,
             rank_documents.size());
    origin = std::min(origin, other["clock_origin_unix_us"].get<std::int64_t>());
    dropped += other.value("dropped_events", std::size_t{0});
    docs.push_back(std::move(doc));
  }
  json events = json::array();
  for (auto& doc : docs) {
    const std::int64_t shift_ns =
        (doc["otherData"]["clock_origin_unix_us"].get<std::int64_t>() - origin) * 1000;
    for (auto& ev : doc["traceEvents"]) {
      if (ev.contains("ts")) ev["ts"] = ns_to_us(us_to_ns(ev["ts"].get<double>()) + shift_ns);
      events.push_back(std::move(ev));
    }
  }
  const json merged = {{"traceEvents", std::move(events)},
                       {"displayTimeUnit", "ms"},
                       {"otherData",
                        {{"ringtrain_ranks", docs.size()},
                         {"clock_origin_unix_us", docs.empty() ? 0 : origin},
                         {"dropped_events", dropped}}}};
  return merged.dump(-1, ' ', false, json::error_handler_t::replace);
}

void merge_trace_files(const std::string& path, int world_size) {
  RT_CHECK(world_size >= 1, "trace: world size must be >= 1, got {}", world_size);
  std::vector<std::string> docs;
  std::vector<std::string> files;
  for (int r = 0; r < world_size; ++r) {
    const std::string file = TraceWriter::rank_file_path(path, r);
    std::ifstream in(file, std::ios::binary);
    RT_CHECK(in.good(),
             "trace: cannot read {} (rank {}'s trace; is the directory shared by all nodes?)", file,
             r);
    std::ostringstream text;
    text << in.rdbuf();
    docs.push_back(std::move(text).str());
    files.push_back(file);
  }
  write_text_file(path, merge_traces(docs), "the merged trace");
  for (const auto& f : files) {
    std::error_code ec;
    fs::remove(f, ec);
  }
}

}  // namespace ringtrain
