#include "core/fatal_agreement.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include <fmt/format.h>

namespace ringtrain {

namespace {

MPI_Comm g_fatal_comm = MPI_COMM_NULL;
constexpr int kOfferTag = 1;       // a failing rank's fingerprint
constexpr int kPrintedTag = 2;     // the speaker's word that its line is out
constexpr int kRelayOfferTag = 3;  // a relay's offer: the fingerprint of its origin's message

bool mpi_usable() {
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized && g_fatal_comm != MPI_COMM_NULL;
}

// FNV-1a: the same on every rank and build, unlike std::hash.
std::uint64_t fingerprint(const std::string& message, int exit_code) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : message) h = (h ^ c) * 1099511628211ULL;
  return (h ^ static_cast<std::uint64_t>(exit_code)) * 1099511628211ULL;
}

// Buffers of sends that may never be received (the peer did not fail): MPI
// may read them until the job ends, so they live as long as the process.
std::uint64_t g_offer = 0;
std::uint64_t g_printed = 0;

void send_to(int rank, std::uint64_t* value, int tag) {
  MPI_Request request = MPI_REQUEST_NULL;
  if (MPI_Isend(value, 1, MPI_UINT64_T, rank, tag, g_fatal_comm, &request) == MPI_SUCCESS)
    MPI_Request_free(&request);
}

}  // namespace

void open_fatal_agreement() {
  if (g_fatal_comm != MPI_COMM_NULL) return;
  if (MPI_Comm_dup(MPI_COMM_WORLD, &g_fatal_comm) != MPI_SUCCESS) {
    g_fatal_comm = MPI_COMM_NULL;
    return;
  }
  MPI_Comm_set_errhandler(g_fatal_comm, MPI_ERRORS_RETURN);
}

void close_fatal_agreement() {
  if (g_fatal_comm == MPI_COMM_NULL) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&g_fatal_comm);
  g_fatal_comm = MPI_COMM_NULL;
}

FatalAgreement agree_on_fatal(const std::string& message, int exit_code, double seconds,
                              const std::string* origin) {
  FatalAgreement a;
  int rank = 0;
  if (!mpi_usable() || MPI_Comm_rank(g_fatal_comm, &rank) != MPI_SUCCESS ||
      MPI_Comm_size(g_fatal_comm, &a.world) != MPI_SUCCESS) {
    a.world = 1;
    return a;
  }
  a.speaker = rank;
  a.group = {rank};
  if (origin == nullptr) a.same_ranks = {rank};
  if (a.world <= 1) return a;
  g_offer = fingerprint(origin != nullptr ? *origin : message, exit_code);
  const int my_tag = origin != nullptr ? kRelayOfferTag : kOfferTag;
  for (int r = 0; r < a.world; ++r)
    if (r != rank) send_to(r, &g_offer, my_tag);
  // Listen until every other rank has offered (they all failed) or the time
  // is up (some rank goes on, or failed later than this wait).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<int> relays;
  if (origin != nullptr) relays.push_back(rank);
  int heard = 0;
  while (heard < a.world - 1 && std::chrono::steady_clock::now() < deadline) {
    // Each offer tag on its own: a speaker's word (another tag) may already
    // be waiting, and must not hide the offers behind it.
    int flag = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kOfferTag, g_fatal_comm, &flag, &status) != MPI_SUCCESS) break;
    if (!flag &&
        MPI_Iprobe(MPI_ANY_SOURCE, kRelayOfferTag, g_fatal_comm, &flag, &status) != MPI_SUCCESS)
      break;
    if (!flag) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    std::uint64_t theirs = 0;
    if (MPI_Recv(&theirs, 1, MPI_UINT64_T, status.MPI_SOURCE, status.MPI_TAG, g_fatal_comm,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS)
      break;
    ++heard;
    if (theirs != g_offer) continue;
    a.group.push_back(status.MPI_SOURCE);
    (status.MPI_TAG == kRelayOfferTag ? relays : a.same_ranks).push_back(status.MPI_SOURCE);
  }
  std::sort(a.group.begin(), a.group.end());
  std::sort(a.same_ranks.begin(), a.same_ranks.end());
  std::sort(relays.begin(), relays.end());
  // The failing rank says its own error; a relay only when none was heard.
  a.speaker = !a.same_ranks.empty() ? a.same_ranks.front() : relays.front();
  a.speaks = a.speaker == rank;
  return a;
}

void tell_fatal_printed(const FatalAgreement& a) {
  if (!mpi_usable() || a.group.size() < 2) return;
  for (int r : a.group)
    if (r != a.speaker) send_to(r, &g_printed, kPrintedTag);
}

bool wait_fatal_printed(const FatalAgreement& a, double seconds) {
  if (!mpi_usable() || a.group.empty()) return false;
  const int speaker = a.speaker;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    int flag = 0;
    if (MPI_Iprobe(speaker, kPrintedTag, g_fatal_comm, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS)
      return false;
    if (flag) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return false;
}

std::string describe_ranks(const std::vector<int>& ranks, int world) {
  if (ranks.size() == 1) return fmt::format("rank {}", ranks.front());
  std::string out = "ranks ";
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (i > 0) out += ',';
    out += fmt::format("{}", ranks[i]);
    if (j == i + 1) out += fmt::format(",{}", ranks[j]);
    if (j > i + 1) out += fmt::format("-{}", ranks[j]);
    i = j + 1;
  }
  if (static_cast<int>(ranks.size()) == world) out += " (all)";
  return out;
}

}  // namespace ringtrain
