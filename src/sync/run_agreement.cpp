#include "ringtrain/sync/run_agreement.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <utility>

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

SignatureField signature_number(std::string name, std::uint64_t value) {
  return {std::move(name), value, std::to_string(value)};
}

SignatureField signature_real(std::string name, double value) {
  return {std::move(name), std::bit_cast<std::uint64_t>(value), fmt::format("{:g}", value)};
}

SignatureField signature_text(std::string name, const std::string& value) {
  return {std::move(name), hash_bytes(value.data(), value.size()),
          value.empty() ? std::string("''") : value};
}

SignatureField signature_bool(std::string name, bool value) {
  return {std::move(name), value ? 1u : 0u, value ? "on" : "off"};
}

namespace {
// Every rank's texts of the fields in `which`, as [rank][i]. Texts travel as
// u64 words: lengths first, then the bytes padded to the longest.
std::vector<std::vector<std::string>> gather_texts(Communicator& comm,
                                                   const std::vector<SignatureField>& fields,
                                                   const std::vector<std::size_t>& which) {
  constexpr char kSeparator = '\x1f';
  std::string mine;
  for (std::size_t i : which) {
    const SignatureField& f = fields[i];
    // Long texts (a model spec) are cut: the message names the field either way.
    std::string text = f.text.empty() ? std::to_string(f.value) : f.text;
    if (text.size() > 200) text = text.substr(0, 197) + "...";
    std::replace(text.begin(), text.end(), kSeparator, ' ');
    mine += text;
    mine += kSeparator;
  }
  const std::vector<std::uint64_t> lengths = gather_u64(comm, {mine.size()});
  const std::uint64_t longest = *std::max_element(lengths.begin(), lengths.end());
  const std::size_t words = static_cast<std::size_t>((longest + 7) / 8);
  std::vector<std::uint64_t> packed(words, 0);
  if (!mine.empty()) std::memcpy(packed.data(), mine.data(), mine.size());
  const std::vector<std::uint64_t> all = gather_u64(comm, packed);
  std::vector<std::vector<std::string>> out(static_cast<std::size_t>(comm.size()));
  for (std::size_t q = 0; q < out.size(); ++q) {
    std::string theirs(lengths[q], '\0');
    std::memcpy(theirs.data(), all.data() + q * words, theirs.size());
    std::size_t pos = 0;
    while (pos < theirs.size()) {
      const std::size_t end = theirs.find(kSeparator, pos);
      out[q].push_back(theirs.substr(pos, end - pos));
      pos = end == std::string::npos ? theirs.size() : end + 1;
    }
    out[q].resize(which.size());
  }
  return out;
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
  // Which fields differ is the same on every rank (all see the same values).
  std::vector<std::size_t> differing;
  for (std::size_t f = 0; f < fields.size(); ++f)
    for (int q = 1; q < world; ++q)
      if (all[static_cast<std::size_t>(q) * stride + 1 + f] != all[1 + f]) {
        differing.push_back(f);
        break;
      }
  if (differing.empty()) return;
  const std::vector<std::vector<std::string>> texts = gather_texts(comm, fields, differing);
  for (std::size_t d = 0; d < differing.size(); ++d) {
    const std::size_t f = differing[d];
    // Ranks grouped by value, in the order of their lowest rank.
    std::vector<std::pair<std::uint64_t, std::vector<int>>> groups;
    for (int q = 0; q < world; ++q) {
      const std::uint64_t v = all[static_cast<std::size_t>(q) * stride + 1 + f];
      auto it =
          std::find_if(groups.begin(), groups.end(), [v](const auto& g) { return g.first == v; });
      if (it == groups.end()) it = groups.insert(groups.end(), {v, {}});
      it->second.push_back(q);
    }
    std::string parts;
    for (const auto& [value, ranks] : groups)
      parts += fmt::format("{}{} on rank{} {}", parts.empty() ? "" : ", but ",
                           texts[static_cast<std::size_t>(ranks.front())][d],
                           ranks.size() > 1 ? "s" : "", rank_list(ranks));
    problems += fmt::format("\n  '{}' is {}", fields[f].name, parts);
  }
  RT_CHECK(false,
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
