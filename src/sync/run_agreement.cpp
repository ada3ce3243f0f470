#include "ringtrain/sync/run_agreement.h"

#include <algorithm>
#include <cstring>
#include <map>

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {
std::string rank_list(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(ranks[i]);
  }
  return out;
}

// Host staging for a few u64s, in memory the backend accepts.
std::vector<std::uint64_t> gather_u64(Communicator& comm, const std::vector<std::uint64_t>& mine) {
  const std::size_t n = mine.size();
  // Control messages are a few integers in host memory: they travel over a
  // host communicator (the trainer keeps one beside the gradient backend,
  // which may be NCCL).
  RT_CHECK(comm.device().is_cpu(),
           "run agreement needs a host communicator, got backend '{}' on {}", comm.name(),
           device_name(comm.device()));
  std::vector<std::uint64_t> in(mine);
  std::vector<std::uint64_t> all(n * static_cast<std::size_t>(comm.size()));
  comm.allgather(BufferView{in.data(), n, DType::i64, Device::cpu()},
                 BufferView{all.data(), all.size(), DType::i64, Device::cpu()});
  return all;
}
}  // namespace

void agree_on_signature(Communicator& comm, const std::vector<SignatureField>& fields) {
  std::vector<std::uint64_t> mine;
  mine.push_back(fields.size());
  for (const auto& f : fields) mine.push_back(f.value);
  const std::vector<std::uint64_t> all = gather_u64(comm, mine);
  const std::size_t stride = mine.size();
  const int world = comm.size();
  std::string problems;
  for (int q = 0; q < world; ++q) {
    if (all[static_cast<std::size_t>(q) * stride] != fields.size()) {
      problems +=
          fmt::format("\n  rank {} sends {} signature fields, rank {} sends {}", q,
                      all[static_cast<std::size_t>(q) * stride], comm.rank(), fields.size());
    }
  }
  RT_CHECK(problems.empty(), "ranks run different ringtrain builds:{}", problems);
  for (std::size_t f = 0; f < fields.size(); ++f) {
    std::map<std::uint64_t, std::vector<int>> by_value;
    for (int q = 0; q < world; ++q)
      by_value[all[static_cast<std::size_t>(q) * stride + 1 + f]].push_back(q);
    if (by_value.size() <= 1) continue;
    std::string parts;
    for (const auto& [value, ranks] : by_value)
      parts += fmt::format("{}{} on rank{} {}", parts.empty() ? "" : ", but ", value,
                           ranks.size() > 1 ? "s" : "", rank_list(ranks));
    problems += fmt::format("\n  '{}' is {}", fields[f].name, parts);
  }
  RT_CHECK(problems.empty(),
           "ranks disagree on the run (check that every rank gets the same flags, "
           "data and build):{}",
           problems);
}

std::uint64_t hash_bytes(const void* data, std::size_t bytes, std::uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = seed;
  // FNV-1a over 8-byte words, then the tail: fast enough to run every
  // --check-every steps on millions of parameters.
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0x100000001b3ull;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

void check_replicas(Communicator& comm, std::uint64_t hash, std::uint64_t step) {
  const std::vector<std::uint64_t> all = gather_u64(comm, {hash});
  std::vector<int> differ;
  for (int q = 1; q < comm.size(); ++q)
    if (all[static_cast<std::size_t>(q)] != all[0]) differ.push_back(q);
  RT_CHECK(differ.empty(),
           "replicas diverged at step {}: the parameters of rank{} {} differ from rank 0's "
           "(hash {:016x} vs {:016x})",
           step, differ.size() > 1 ? "s" : "", rank_list(differ),
           all[differ.empty() ? 0 : differ[0]], all[0]);
}

}  // namespace ringtrain
