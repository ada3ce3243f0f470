#include "comm/arrival_board.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <string>

#include "comm/deadline.h"
#include "core/check_mpi.h"

namespace ringtrain::comm_detail {

namespace {
constexpr MPI_Aint kSlotBytes = 64;  // one cache line per rank
// Slot words: the last collective entered, the process id, the pid namespace.
constexpr std::size_t kSeqWord = 0, kPidWord = 1, kPidNamespaceWord = 2;

std::uint64_t pid_namespace() {
  struct stat st {};
  return ::stat("/proc/self/ns/pid", &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0;
}

// A process that no longer exists, or that has exited and waits to be reaped.
bool process_gone(long pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;  // no /proc: only kill() can tell
  const auto close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  const char state = text[close + 2];
  return state == 'Z' || state == 'X';
}
}  // namespace

ArrivalBoard::ArrivalBoard(MPI_Comm node, MPI_Comm world) {
  int n = 0, world_size = 0;
  RT_MPI_CHECK(MPI_Comm_size(node, &n));
  RT_MPI_CHECK(MPI_Comm_size(world, &world_size));
  covers_world_ = n == world_size;
  void* base = nullptr;
  RT_MPI_CHECK(MPI_Win_allocate_shared(kSlotBytes, 1, MPI_INFO_NULL, node, &base, &win_));
  mine_ = static_cast<std::uint64_t*>(base);
  mine_[kSeqWord] = 0;
  mine_[kPidWord] = static_cast<std::uint64_t>(::getpid());
  mine_[kPidNamespaceWord] = pid_namespace();
  slots_.resize(static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q) {
    MPI_Aint size = 0;
    int disp = 0;
    void* p = nullptr;
    RT_MPI_CHECK(MPI_Win_shared_query(win_, q, &size, &disp, &p));
    slots_[static_cast<std::size_t>(q)] = static_cast<std::uint64_t*>(p);
  }
  MPI_Group g_node, g_world;
  RT_MPI_CHECK(MPI_Comm_group(node, &g_node));
  RT_MPI_CHECK(MPI_Comm_group(world, &g_world));
  std::vector<int> local(static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q) local[static_cast<std::size_t>(q)] = q;
  world_ranks_.resize(static_cast<std::size_t>(n));
  RT_MPI_CHECK(MPI_Group_translate_ranks(g_node, n, local.data(), g_world, world_ranks_.data()));
  MPI_Group_free(&g_node);
  MPI_Group_free(&g_world);
  // Every counter is zero before anyone reads one.
  RT_MPI_CHECK(MPI_Barrier(node));
}

ArrivalBoard::~ArrivalBoard() {
  if (win_ != MPI_WIN_NULL && !unwinding()) MPI_Win_free(&win_);
}

void ArrivalBoard::enter(std::uint64_t seq) {
  std::atomic_ref<std::uint64_t>(mine_[kSeqWord]).store(seq, std::memory_order_relaxed);
}

std::vector<int> ArrivalBoard::behind(std::uint64_t seq) const {
  std::vector<int> out;
  for (std::size_t q = 0; q < slots_.size(); ++q)
    if (std::atomic_ref<std::uint64_t>(slots_[q][kSeqWord]).load(std::memory_order_relaxed) < seq)
      out.push_back(world_ranks_[q]);
  return out;
}

std::vector<LostRank> ArrivalBoard::lost() const {
  std::vector<LostRank> out;
  for (std::size_t q = 0; q < slots_.size(); ++q) {
    const std::uint64_t* slot = slots_[q];
    if (slot == mine_ || slot[kPidNamespaceWord] != mine_[kPidNamespaceWord]) continue;
    const long pid = static_cast<long>(slot[kPidWord]);
    if (process_gone(pid)) out.push_back({world_ranks_[q], pid});
  }
  return out;
}

}  // namespace ringtrain::comm_detail
