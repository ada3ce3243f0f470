// `ringtrain bench allreduce|broadcast|allgather`: collective bandwidth in the
// style of nccl-tests. One harness with no branch on the collective: each
// collective is an entry of bench_collective_table.h (how to size, run and
// check it, its bus-bandwidth factor). For every size and backend it prints
//   backend size count type redop root | time algbw busbw #wrong | memcpy
// where memcpy is the bandwidth of every rank copying the same size at the
// same time (the ceiling on one node). Backends and memcpy are timed in
// batches that take turns (see measure()). Inputs are a function of (seed,
// rank, index) and every result is checked; any wrong element makes the exit
// code non-zero.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/bench_collective_table.h"
#include "apps/bench_test_data.h"
#include "apps/command.h"
#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/data/output_guard.h"
#include "ringtrain/tensor/device_memory.h"

namespace ringtrain::apps {

namespace {

struct BenchOptions {
  std::string min_bytes = "8";
  std::string max_bytes = "64M";
  int factor = 2;
  int iters = 20;
  int warmup = 5;
  std::string backends = "all";
  std::string dtype = "f32";
  std::string op = "sum";
  int root = 0;
  bool inplace = false;
  std::string json;
  bool force = false;
  double timeout = 300;
  std::uint64_t seed = 1;
};

// "4096", "64K", "64KiB", "1M", "2G" (powers of 1024).
std::size_t parse_bytes(const std::string& flag, const std::string& text) {
  std::size_t pos = 0;
  unsigned long long v = 0;
  try {
    v = std::stoull(text, &pos);
  } catch (const std::exception&) {
    RT_CHECK(false, "{} '{}' is not a size (e.g. 8, 4K, 64M, 1G)", flag, text);
  }
  std::string unit = text.substr(pos);
  if (unit.size() > 1 && (unit.ends_with("iB") || unit.ends_with("ib")))
    unit = unit.substr(0, unit.size() - 2);
  else if (unit.size() > 1 && (unit.back() == 'B' || unit.back() == 'b'))
    unit.pop_back();
  std::size_t mult = 1;
  if (unit == "K" || unit == "k")
    mult = std::size_t{1} << 10;
  else if (unit == "M" || unit == "m")
    mult = std::size_t{1} << 20;
  else if (unit == "G" || unit == "g")
    mult = std::size_t{1} << 30;
  else
    RT_CHECK(unit.empty(), "{} '{}': unknown unit '{}' (use K, M or G)", flag, text, unit);
  return static_cast<std::size_t>(v) * mult;
}

std::vector<std::string> split_backends(const std::string& text, const Topology& topo) {
  if (text == "all") return available_backends(topo);
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = text.find(',', start);
    const std::string item =
        text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    RT_CHECK(!item.empty(), "--backend '{}': empty entry (expected e.g. shm,ring,mpi or all)",
             text);
    out.push_back(item);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

// ------------------------------------------------------------------ harness
struct Row {
  std::string backend;
  std::size_t bytes = 0, count = 0;
  double time_us = 0, algbw = 0, busbw = 0, memcpy_gbs = 0;
  std::size_t wrong = 0;
};

class Bench {
  static constexpr int kTimingRounds = 4;

 public:
  Bench(const CollectiveEntry& coll, const BenchOptions& o, const Topology& topo)
      : coll_(coll), o_(o), topo_(topo), dtype_(parse_dtype(o.dtype)), op_(parse_reduce_op(o.op)) {
    CommOptions co;
    co.timeout_seconds = o.timeout;
    // Host numbers (timings, wrong counts) between the ranks: host memory,
    // whatever the device of the backends measured.
    harness_ = make_communicator("mpi", topo.on_host(), co);
  }

  int run() {
    const std::size_t es = dtype_size(dtype_);
    const std::size_t lo = parse_bytes("-b", o_.min_bytes), hi = parse_bytes("-e", o_.max_bytes);
    RT_CHECK(lo <= hi, "-b {} is larger than -e {}", lo, hi);
    RT_CHECK(o_.factor >= 2, "-f must be at least 2, got {}", o_.factor);
    RT_CHECK(o_.iters >= 1, "-n must be at least 1, got {}", o_.iters);
    RT_CHECK(o_.warmup >= 0, "-w must be 0 or more, got {}", o_.warmup);
    RT_CHECK(o_.root >= 0 && o_.root < topo_.world_size(), "--root {} is not a rank of 0..{}",
             o_.root, topo_.world_size() - 1);
    std::vector<std::size_t> sizes;
    for (std::size_t s = std::max(lo, es); s <= hi; s *= static_cast<std::size_t>(o_.factor))
      sizes.push_back(s);
    if (sizes.empty()) sizes.push_back(std::max(lo, es));
    const std::vector<std::string> kinds = split_backends(o_.backends, topo_);
    CommOptions co;
    co.timeout_seconds = o_.timeout;

    const int n = topo_.world_size();
    print_header(kinds);
    std::vector<Row> rows;
    bool any_wrong = false;
    // Every backend is set up first; then, size by size, all backends are
    // measured together (see measure()). Each keeps one allocation of the
    // largest size, from its preferred memory.
    std::vector<Subject> subjects;
    const std::size_t max_count = count_for(sizes.back());
    const std::size_t out_elems = coll_.output_count(max_count, n);
    for (const std::string& kind : kinds) {
      Subject& s = subjects.emplace_back();
      s.kind = kind;
      s.comm = make_communicator(kind, topo_, co);
      s.in_all = s.comm->allocate(max_count, dtype_);
      s.out_all = s.comm->allocate(out_elems, dtype_);
    }
    for (std::size_t k = 0; k < sizes.size(); ++k) {
      const std::vector<Row> measured = measure(subjects, count_for(sizes[k]));
      for (std::size_t j = 0; j < measured.size(); ++j) {
        any_wrong |= measured[j].wrong > 0;
        print_row(measured[j]);
        rows.push_back(measured[j]);
        subjects[j].bus_sum += measured[j].busbw;
      }
    }
    for (const Subject& s : subjects)
      averages_.emplace_back(s.kind, s.bus_sum / static_cast<double>(sizes.size()));
    if (topo_.rank() == 0) {
      std::string out = fmt::format("# Out of bounds values : {} {}\n", any_wrong ? "FAILED" : "0",
                                    any_wrong ? "" : "OK");
      for (const auto& [kind, avg] : averages_)
        out += fmt::format("# Avg bus bandwidth    : {:.3f} GB/s ({})\n", avg, kind);
      std::fputs(out.c_str(), stdout);
      std::fflush(stdout);
      if (!o_.json.empty()) write_json(rows);
    }
    return any_wrong ? 1 : 0;
  }

 private:
  std::size_t count_for(std::size_t bytes) const {
    return coll_.input_count(bytes, dtype_size(dtype_), topo_.world_size());
  }

  CollectiveArgs args(std::uint64_t seed, int rounding_steps) const {
    return {op_, o_.root, topo_.world_size(), topo_.rank(), seed, rounding_steps};
  }

  double max_over_ranks(double v) {
    harness_->allreduce(view_of(&v, 1), view_of(&v, 1), ReduceOp::max);
    return v;
  }
  std::size_t sum_over_ranks(std::size_t v) {
    long long x = static_cast<long long>(v);
    harness_->allreduce(view_of(&x, 1), view_of(&x, 1), ReduceOp::sum);
    return static_cast<std::size_t>(x);
  }

  // Every rank copies `reps` times at the same time; returns this rank's seconds.
  double time_memcpy(std::vector<char>& src, std::vector<char>& dst, int reps) {
    const std::size_t bytes = src.size();
    std::memcpy(dst.data(), src.data(), bytes);  // warm, as every batch is
    harness_->barrier();
    Stopwatch sw;
    for (int i = 0; i < reps; ++i) {
      std::memcpy(dst.data(), src.data(), bytes);
      src[static_cast<std::size_t>(i) % bytes] =
          static_cast<char>(dst[bytes - 1] + 1);  // keep the copy live
    }
    return sw.seconds();
  }

  void run_once(Communicator& c, BufferView in, BufferView out) {
    coll_.run(c, in, out, args(o_.seed, 1));
  }

  // One backend under measurement: its communicator, its buffers of the
  // largest size, and the current size's views and results.
  struct Subject {
    std::string kind;
    std::unique_ptr<Communicator> comm;
    BufferView in_all, out_all;
    BufferView in, out;
    std::size_t wrong = 0;
    double seconds = 0;
    double bus_sum = 0;
  };

  // Points s.in / s.out at `count` elements, runs the collective once on fresh
  // data and counts the wrong elements over all ranks.
  void check(Subject& s, std::size_t count) {
    const int n = topo_.world_size();
    const std::size_t out_count = coll_.output_count(count, n);
    if (o_.inplace) {
      s.out = s.out_all.slice(0, out_count);
      s.in = s.out.slice(coll_.inplace_offset(count, topo_.rank()), count);
    } else {
      s.in = s.in_all.slice(0, count);
      s.out = s.out_all.slice(0, out_count);
    }
    const std::uint64_t seed = o_.seed + count;
    // GPU buffers are filled and checked through host copies.
    std::vector<char> host_in(s.in.bytes()), host_out(s.out.bytes());
    const BufferView in_host{host_in.data(), s.in.count, s.in.dtype, Device::cpu()};
    const BufferView out_host{host_out.data(), s.out.count, s.out.dtype, Device::cpu()};
    fill_test_data(in_host, seed, topo_.rank());
    copy_view(s.in, in_host);
    run_once(*s.comm, s.in, s.out);
    copy_view(out_host, s.out);
    const int rounding_steps = s.comm->name() == "nccl" ? n + 1 : 1;
    const std::size_t wrong = coll_.count_wrong(out_host, count, args(seed, rounding_steps));
    s.wrong = sum_over_ranks(wrong);
    // In place, the data would grow with every sum: zeros stay put and cost
    // the same to add.
    if (o_.inplace && s.in.count > 0) device_zero(s.in.ptr, s.in.bytes(), s.in.device);
  }

  // One row per backend for `count` elements. The backends' timed batches and
  // a memcpy batch take turns, round after round, so that every row and the
  // ceiling see the same load on a shared machine. Each batch starts after
  // one untimed run of its own, so none pays for another evicting its
  // buffers; each time is the slowest rank's total.
  std::vector<Row> measure(std::vector<Subject>& subjects, std::size_t count) {
    const int n = topo_.world_size();
    for (Subject& s : subjects) {
      check(s, count);
      for (int i = 0; i < o_.warmup; ++i) run_once(*s.comm, s.in, s.out);
      s.seconds = 0;
    }
    const std::size_t es = dtype_size(dtype_);
    const std::size_t bytes = coll_.output_count(count, n) * es;
    std::vector<char> copy_src(std::max<std::size_t>(1, bytes), 1), copy_dst(copy_src.size(), 0);
    const int rounds = std::min(o_.iters, kTimingRounds);
    double copy_s = 0;
    for (int k = 0; k < rounds; ++k) {
      const int batch = o_.iters / rounds + (k < o_.iters % rounds ? 1 : 0);
      for (Subject& s : subjects) {
        run_once(*s.comm, s.in, s.out);
        s.comm->barrier();
        Stopwatch sw;
        for (int i = 0; i < batch; ++i) run_once(*s.comm, s.in, s.out);
        s.seconds += sw.seconds();
      }
      copy_s += time_memcpy(copy_src, copy_dst, batch);
    }
    const double copy_t = max_over_ranks(copy_s / o_.iters);  // the batches add up to -n copies
    std::vector<Row> rows;
    for (Subject& s : subjects) {
      const double t = max_over_ranks(s.seconds / o_.iters);
      Row& row = rows.emplace_back();
      row.backend = s.kind;
      row.count = count;
      row.bytes = bytes;
      row.time_us = t * 1e6;
      row.algbw = t > 0 ? static_cast<double>(bytes) / t / 1e9 : 0;
      row.busbw = row.algbw * coll_.bus_factor(n);
      row.wrong = s.wrong;
      row.memcpy_gbs = static_cast<double>(copy_src.size()) / copy_t / 1e9;
    }
    return rows;
  }

  void print_header(const std::vector<std::string>& kinds) {
    if (topo_.rank() != 0) return;
    std::string h = fmt::format(
        "# ringtrain bench {}: {} rank(s) on {} node(s), backends {}, dtype {}, op {}, {}, {} "
        "iters, {} warm-up\n",
        coll_.name, topo_.world_size(), topo_.node_count(), fmt::join(kinds, ","),
        dtype_name(dtype_), coll_.takes_op ? reduce_op_name(op_) : "none",
        o_.inplace ? "in place" : "out of place", o_.iters, o_.warmup);
    h += fmt::format("# {:>7} {:>12} {:>12} {:>5} {:>6} {:>5} {:>10} {:>8} {:>8} {:>7} {:>8}\n",
                     "backend", "size", "count", "type", "redop", "root", "time", "algbw", "busbw",
                     "#wrong", "memcpy");
    h += fmt::format("# {:>7} {:>12} {:>12} {:>5} {:>6} {:>5} {:>10} {:>8} {:>8} {:>7} {:>8}\n", "",
                     "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(GB/s)");
    std::fputs(h.c_str(), stdout);
  }

  void print_row(const Row& r) {
    if (topo_.rank() != 0) return;
    std::string line = fmt::format(
        "  {:>7} {:>12} {:>12} {:>5} {:>6} {:>5} {:>10.2f} {:>8.3f} {:>8.3f} {:>7} {:>8.3f}\n",
        r.backend, r.bytes, r.count, dtype_name(dtype_),
        coll_.takes_op ? reduce_op_name(op_) : "none",
        coll_.takes_root ? std::to_string(o_.root) : "-", r.time_us, r.algbw, r.busbw, r.wrong,
        r.memcpy_gbs);
    std::fputs(line.c_str(), stdout);
    std::fflush(stdout);
  }

  void write_json(const std::vector<Row>& rows) {
    nlohmann::json list = nlohmann::json::array();
    for (const Row& r : rows)
      list.push_back({{"collective", coll_.name},
                      {"backend", r.backend},
                      {"ranks", topo_.world_size()},
                      {"nodes", topo_.node_count()},
                      {"bytes", r.bytes},
                      {"count", r.count},
                      {"dtype", std::string(dtype_name(dtype_))},
                      {"op", coll_.takes_op ? std::string(reduce_op_name(op_)) : "none"},
                      {"root", coll_.takes_root ? o_.root : -1},
                      {"inplace", o_.inplace},
                      {"time_us", r.time_us},
                      {"algbw", r.algbw},
                      {"busbw", r.busbw},
                      {"wrong", r.wrong},
                      {"memcpy", r.memcpy_gbs}});
    write_output_text(o_.json, list.dump(1) + "\n", "--json");
  }

  const CollectiveEntry& coll_;
  BenchOptions o_;
  const Topology& topo_;
  DType dtype_;
  ReduceOp op_;
  std::unique_ptr<Communicator> harness_;
  std::vector<std::pair<std::string, double>> averages_;
};

CLI::App* add_collective_bench(CLI::App& bench, CommandContext& ctx, const CollectiveEntry& coll) {
  const char* name = coll.name;
  auto opts = std::make_shared<BenchOptions>();
  CLI::App* sub = bench.add_subcommand(name, coll.summary);
  sub->footer(
      fmt::format(
          "Run under mpirun, one rank per core (--bind-to core), e.g.\n"
          "  mpirun -np 2 --bind-to core ringtrain bench {} --backend all -b 4K -e 64M -f 4\n",
          name) +
      "Columns: time per call (slowest rank), algbw = size/time, busbw = algbw x the\n"
      "collective's bus factor (nccl-tests), #wrong = elements that differ from the expected\n"
      "result (any makes the exit code 1), memcpy = every rank copying the size at once, the\n"
      "ceiling on one node. For each size the backends' timed batches and a memcpy batch take\n"
      "turns, 4 rounds, so that the rows compared see the same load.");
  sub->add_option("-b,--minbytes", opts->min_bytes, "Smallest size in bytes (suffix K, M, G)")
      ->capture_default_str();
  sub->add_option("-e,--maxbytes", opts->max_bytes, "Largest size in bytes (suffix K, M, G)")
      ->capture_default_str();
  sub->add_option("-f,--stepfactor", opts->factor,
                  "Multiply the size by this from one row to the next")
      ->capture_default_str()
      ->check(CLI::Range(2, 1024));
  sub->add_option("-n,--iters", opts->iters, "Timed iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  sub->add_option("-w,--warmup_iters", opts->warmup, "Untimed warm-up iterations per size")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  sub->add_option("--backend", opts->backends,
                  "Backends to compare: a comma list of auto, nccl, shm, ring, mpi, or all")
      ->capture_default_str();
  sub->add_option("--dtype", opts->dtype, "Element type: f32, f64, f16, bf16, i32, i64")
      ->capture_default_str()
      ->check(CLI::IsMember({"f32", "f64", "f16", "bf16", "i32", "i64"}));
  if (coll.takes_op)
    sub->add_option("--op", opts->op, "Reduction: sum, avg, max, min")
        ->capture_default_str()
        ->check(CLI::IsMember({"sum", "avg", "max", "min"}));
  if (coll.takes_root)
    sub->add_option("--root", opts->root, "Rank that broadcasts")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
  sub->add_flag("--inplace", opts->inplace, "Run in place (output buffer = input buffer)");
  sub->add_option("--json", opts->json,
                  "Also write the rows to this file as a JSON list (an existing file is "
                  "refused unless --force)");
  sub->add_flag("--force", opts->force, "Replace an existing --json file");
  sub->add_option("--timeout", opts->timeout,
                  "Seconds a collective may wait for a peer before the job aborts")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  sub->add_option("--seed", opts->seed, "Seed of the test data")->capture_default_str();
  add_device_options(sub, ctx, "cpu");
  sub->parse_complete_callback([&ctx, opts, &coll] {
    // Flag values that need no MPI are checked now, so mistakes are instant.
    const std::size_t lo = parse_bytes("-b", opts->min_bytes),
                      hi = parse_bytes("-e", opts->max_bytes);
    RT_CHECK(lo <= hi, "-b {} is larger than -e {}", opts->min_bytes, opts->max_bytes);
    if (!opts->json.empty()) guard_output(opts->json, {}, opts->force, "--json");
    ctx.action = [opts, &coll](const Topology& topo) { return Bench(coll, *opts, topo).run(); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

// One bench subcommand per table entry.
namespace {
const bool rt_collective_benches_registered = [] {
  for (const ringtrain::apps::CollectiveEntry& entry : ringtrain::apps::collective_entries())
    ringtrain::apps::register_command(
        {"bench", entry.name, entry.order,
         [&entry](CLI::App& bench, ringtrain::apps::CommandContext& ctx) {
           return ringtrain::apps::add_collective_bench(bench, ctx, entry);
         }});
  return true;
}();
}  // namespace
