#include "comm/arrival_board.h"

#include <atomic>

#include "comm/deadline.h"
#include "core/check_mpi.h"

namespace ringtrain::comm_detail {

namespace {
constexpr MPI_Aint kSlotBytes = 64;  // one cache line per rank
}

ArrivalBoard::ArrivalBoard(MPI_Comm node, MPI_Comm world) {
  int n = 0, world_size = 0;
  RT_MPI_CHECK(MPI_Comm_size(node, &n));
  RT_MPI_CHECK(MPI_Comm_size(world, &world_size));
  covers_world_ = n == world_size;
  void* base = nullptr;
  RT_MPI_CHECK(MPI_Win_allocate_shared(kSlotBytes, 1, MPI_INFO_NULL, node, &base, &win_));
  mine_ = static_cast<std::uint64_t*>(base);
  *mine_ = 0;
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
  std::atomic_ref<std::uint64_t>(*mine_).store(seq, std::memory_order_relaxed);
}

std::vector<int> ArrivalBoard::behind(std::uint64_t seq) const {
  std::vector<int> out;
  for (std::size_t q = 0; q < slots_.size(); ++q)
    if (std::atomic_ref<std::uint64_t>(*slots_[q]).load(std::memory_order_relaxed) < seq)
      out.push_back(world_ranks_[q]);
  return out;
}

}  // namespace ringtrain::comm_detail
