// Which ranks of this node have entered which collective: one counter per local
// rank in a small MPI-3 shared window. A rank stores the sequence number of each
// collective as it starts it; when a wait times out, the ranks whose counter is
// behind are the ranks that did not arrive. Costs one relaxed store per op.
// Each slot also holds its rank's process id, so that a wait can see that a
// rank of this node has died (PeerWatch) and say so at once.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <vector>

#include "comm/deadline.h"

namespace ringtrain::comm_detail {

struct LostRank {
  int world_rank;
  long pid;
};

class ArrivalBoard final : public PeerWatch {
 public:
  // Collective over `node` (ranks sharing memory); world ranks for messages.
  ArrivalBoard(MPI_Comm node, MPI_Comm world);
  ~ArrivalBoard();
  ArrivalBoard(const ArrivalBoard&) = delete;
  ArrivalBoard& operator=(const ArrivalBoard&) = delete;

  void enter(std::uint64_t seq);
  // World ranks on this node that have not yet entered collective `seq`.
  std::vector<int> behind(std::uint64_t seq) const;
  // Whether every world rank is on this node (then behind() is complete).
  bool covers_world() const { return covers_world_; }
  // Ranks of this node whose process is gone (or a zombie): killed, crashed.
  // Only ranks in this process's pid namespace are looked at.
  std::vector<LostRank> lost() const;
  bool peer_lost() const override { return !lost().empty(); }

 private:
  MPI_Win win_ = MPI_WIN_NULL;
  std::uint64_t* mine_ = nullptr;
  std::vector<std::uint64_t*> slots_;
  std::vector<int> world_ranks_;
  bool covers_world_ = false;
};

}  // namespace ringtrain::comm_detail
