#include "ringtrain/comm/flight_recorder.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ringtrain/comm/flight_verdict.h"
#include "ringtrain/core/fatal.h"

namespace ringtrain::flight {

namespace {

struct Record {
  std::uint64_t id = 0;  // 0: an empty slot
  std::string channel, backend, op;
  std::uint64_t seq = 0;
  std::uint64_t step = 0;
  std::int64_t bucket = -1;
  std::size_t bytes = 0;
  double issued_s = 0, started_s = 0, completed_s = 0;  // 0: not yet
};

// The live page, <dir>/rank-<r>.live, mapped shared: every phase change and
// issue lands in the page cache at once, so a verdict on the same node reads
// where a rank stopped or died exactly, not as of its last snapshot.
void write_live(LiveFlightState* live, const std::string& phase, double since, std::uint64_t step,
                const nlohmann::json& issued) {
  if (!live) return;
  live->version.fetch_add(1, std::memory_order_acq_rel);  // odd: being written
  std::snprintf(live->phase, sizeof(live->phase), "%s", phase.c_str());
  live->phase_since = since;
  live->step = step;
  std::size_t i = 0;
  for (const auto& [channel, seq] : issued.items()) {
    if (i == std::size(live->issued)) break;
    std::snprintf(live->issued[i].channel, sizeof(live->issued[i].channel), "%s", channel.c_str());
    live->issued[i].seq = seq.get<std::uint64_t>();
    ++i;
  }
  live->updated = wall_seconds();
  live->version.fetch_add(1, std::memory_order_acq_rel);
}

struct Recorder {
  std::mutex mutex;
  int rank = 0, world_size = 1;
  std::string host, device, job;
  std::string phase = "setup";
  double phase_since = wall_seconds();
  std::uint64_t step = 0;
  std::int64_t bucket = -1;
  std::vector<Record> ring = std::vector<Record>(256);
  std::uint64_t next_id = 0;
  // The last sequence number issued per channel: the ring may have dropped it.
  nlohmann::json issued = nlohmann::json::object();

  std::string dir;
  double period_s = 1.0;
  std::thread snapshots;
  std::condition_variable wake;
  bool stopping = false;
  AbortHookId hook = 0;
  bool hook_registered = false;
  LiveFlightState* live = nullptr;

  void publish() { write_live(live, phase, phase_since, step, issued); }

  Record* find(std::uint64_t id) {
    Record& r = ring[id % ring.size()];
    return r.id == id ? &r : nullptr;
  }
};

Recorder& recorder() {
  static Recorder* r = new Recorder();  // never destroyed: the abort hook may run at exit
  return *r;
}

nlohmann::json record_json(const Record& r) {
  return {{"id", r.id},
          {"channel", r.channel},
          {"backend", r.backend},
          {"op", r.op},
          {"seq", r.seq},
          {"step", r.step},
          {"bucket", r.bucket},
          {"bytes", r.bytes},
          {"issued", r.issued_s},
          {"started", r.started_s},
          {"completed", r.completed_s}};
}

void write_atomic(const std::string& path, const std::string& text) {
  const std::string tmp = fmt::format("{}.tmp{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text;
    out.flush();
    if (!out) {  // best effort: a full disk must not hide the real error
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

std::string rank_file(const std::string& dir, int rank) {
  return (std::filesystem::path(dir) / fmt::format("rank-{}.json", rank)).string();
}

// The abort hook: the final record, then the verdict from the first rank here.
void on_fatal() {
  Recorder& r = recorder();
  const std::string dir = r.dir;
  if (dir.empty()) return;
  const std::string reason = fatal_message();
  write_file(dir, /*final_record=*/true, reason);
  const std::string verdict_path = (std::filesystem::path(dir) / "verdict.txt").string();
  const int fd = ::open(verdict_path.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
  if (fd < 0) {
    // Another rank got there first: give it time to look at the others (a
    // stopped rank is resumed by the launcher once anyone aborts).
    for (int i = 0; i < 50; ++i) {
      std::error_code ec;
      if (std::filesystem::file_size(verdict_path, ec) > 0) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return;
  }
  ::close(fd);
  // Only this job's records: an earlier job's files in the same directory
  // would name ranks this job does not have.
  const FlightJob job = select_job(read_flight_dir(dir), r.job);
  const std::string verdict = flight_verdict(job.ranks, wall_seconds());
  write_atomic(verdict_path, verdict + "\njob: " + r.job + "\n");
  // A plain error (nobody waiting on anybody) has said it all in its message.
  if (verdict.rfind("no rank is waiting", 0) == 0) return;
  std::fprintf(stderr, "[rank %d/%s] flight verdict: %s\n[rank %d/%s] flight records: %s\n", r.rank,
               r.host.c_str(), verdict.c_str(), r.rank, r.host.c_str(), dir.c_str());
  std::fflush(stderr);
}

}  // namespace

double wall_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void set_identity(int rank, int world_size, const std::string& host, const std::string& device) {
  const std::string job = job_identity();
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.rank = rank;
  r.world_size = world_size;
  r.host = host;
  r.device = device;
  r.job = job;
}

std::string job_identity() {
  const auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (const std::string id = env("SLURM_JOB_ID"); !id.empty()) {
    std::string out = "slurm " + id;
    if (const std::string step = env("SLURM_STEP_ID"); !step.empty()) out += "." + step;
    if (const std::string again = env("SLURM_RESTART_COUNT"); !again.empty() && again != "0")
      out += " (requeue " + again + ")";
    // A step may hold several mpirun launches (ringtrain-mpirun restarts).
    if (const std::string ns = env("PMIX_NAMESPACE"); !ns.empty()) out += ", mpirun " + ns;
    return out;
  }
  for (const char* launcher :
       {"PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid"})
    if (const std::string ns = env(launcher); !ns.empty()) return "mpirun " + ns;
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return fmt::format("process {} on {}", static_cast<long>(::getpid()), host);
}

void enter_phase(std::string_view phase, std::uint64_t step) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  if (r.phase != phase || r.step != step) {
    r.phase = phase;
    r.phase_since = wall_seconds();
    r.step = step;
    r.publish();
  }
}

void set_bucket(std::int64_t bucket) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.bucket = bucket;
}

std::uint64_t on_issue(std::string_view channel, std::string_view backend, std::string_view op,
                       std::uint64_t seq, std::size_t bytes) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  Record& rec = r.ring[++r.next_id % r.ring.size()];
  rec = Record{};
  rec.id = r.next_id;
  rec.channel = channel;
  rec.backend = backend;
  rec.op = op;
  rec.seq = seq;
  rec.step = r.step;
  rec.bucket = r.bucket;
  rec.bytes = bytes;
  rec.issued_s = wall_seconds();
  r.issued[std::string(channel)] = seq;
  r.publish();
  return rec.id;
}

void on_start(std::uint64_t id) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  if (Record* rec = r.find(id)) rec->started_s = wall_seconds();
}

void on_complete(std::uint64_t id) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  if (Record* rec = r.find(id)) rec->completed_s = wall_seconds();
}

std::string to_json(bool final_record, std::string_view reason) {
  Recorder& r = recorder();
  // try_lock with a bound: a thread that died holding the lock (it cannot, but
  // the abort path must never hang) only costs a record without the lock.
  std::unique_lock lock(r.mutex, std::defer_lock);
  for (int i = 0; i < 100 && !lock.try_lock(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  nlohmann::json records = nlohmann::json::array();
  const std::size_t k = r.ring.size();
  const std::uint64_t first = r.next_id >= k ? r.next_id - k + 1 : 1;
  for (std::uint64_t id = first; id <= r.next_id; ++id)
    if (const Record* rec = r.find(id)) records.push_back(record_json(*rec));
  nlohmann::json j = {{"format", "ringtrain-flight-1"},
                      {"job", r.job},
                      {"rank", r.rank},
                      {"world_size", r.world_size},
                      {"host", r.host},
                      {"pid", static_cast<long>(::getpid())},
                      {"device", r.device},
                      {"phase", r.phase},
                      {"phase_since", r.phase_since},
                      {"step", r.step},
                      {"issued", r.issued},
                      {"written", wall_seconds()},
                      {"period", r.period_s},
                      {"final", final_record},
                      {"reason", std::string(reason)},
                      {"records", records}};
  return j.dump(1);
}

void write_file(const std::string& dir, bool final_record, std::string_view reason) {
  // The final record is the last word: a snapshot must not replace it.
  static std::mutex file_mutex;
  static bool final_written = false;
  std::lock_guard lock(file_mutex);
  if (final_written && !final_record) return;
  write_atomic(rank_file(dir, recorder().rank), to_json(final_record, reason));
  if (final_record) final_written = true;
}

void start(const std::string& dir, std::size_t capacity, double period_s) {
  Recorder& r = recorder();
  stop();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  {
    std::lock_guard lock(r.mutex);
    r.ring.assign(capacity > 0 ? capacity : 1, Record{});
    r.next_id = 0;
    r.dir = dir;
    r.period_s = period_s;
    r.stopping = false;
  }
  // A verdict left by an earlier job in the same directory is not this one's.
  if (r.rank == 0) std::filesystem::remove(std::filesystem::path(dir) / "verdict.txt", ec);
  if (!r.live) {
    const std::string path =
        (std::filesystem::path(dir) / fmt::format("rank-{}.live", r.rank)).string();
    // Not O_TRUNC: another live process may have this file mapped (a job that
    // shares --flight-dir), and a page of a mapping past the file's end is a
    // SIGBUS there; ftruncate sets the size, the placement new the contents.
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0644);
    if (fd >= 0 && ::ftruncate(fd, sizeof(LiveFlightState)) == 0) {
      void* p = ::mmap(nullptr, sizeof(LiveFlightState), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (p != MAP_FAILED) {
        r.live = new (p) LiveFlightState();
        std::lock_guard lock(r.mutex);
        r.live->pid = ::getpid();
        r.publish();
      }
    }
    if (fd >= 0) ::close(fd);
  }
  if (!r.hook_registered) {
    r.hook = register_abort_hook(on_fatal);
    r.hook_registered = true;
  }
  r.snapshots = std::thread([&r] {
    std::unique_lock lock(r.mutex);
    while (!r.stopping) {
      const std::string path_dir = r.dir;
      lock.unlock();
      write_file(path_dir, false, "");
      lock.lock();
      r.wake.wait_for(lock, std::chrono::duration<double>(r.period_s), [&r] { return r.stopping; });
    }
  });
}

void stop() {
  Recorder& r = recorder();
  {
    std::lock_guard lock(r.mutex);
    r.stopping = true;
  }
  r.wake.notify_all();
  if (r.snapshots.joinable()) r.snapshots.join();
}

}  // namespace ringtrain::flight
