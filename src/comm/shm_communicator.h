// The "shm" backend: all-reduce through one node's shared memory. This header
// holds the class and its shared-memory synchronisation; the collectives
// within one node are in shm_communicator.cpp, the hierarchical ones across
// nodes in shm_hierarchical.cpp.
//
// Every rank's buffers can live in an MPI-3 shared window (allocate()), which
// all ranks of the node map. Rank r owns slice r of the buffer: it reads that
// slice in every rank's buffer once, reduces, and writes the result straight
// into every rank's buffer. Per rank that is S/n * n reads + S/n * n writes =
// 2S bytes, the traffic of one memcpy of S: the floor.
//
//     rank 0 buffer  [ s0 | s1 | s2 ]      rank 0 reduces s0 of all three
//     rank 1 buffer  [ s0 | s1 | s2 ]      rank 1 reduces s1 of all three
//     rank 2 buffer  [ s0 | s1 | s2 ]      rank 2 reduces s2 of all three
//                      and each writes its reduced slice into all three buffers
//
// A buffer from outside the window is staged: copied piece by piece into this
// rank's staging area in the window, reduced there, copied back.
//
// Synchronisation is one counter ("epoch") per rank in shared memory, each on
// its own cache line: a rank bumps it when it has published something (its
// descriptor and input; its reduced slice) and waits until every peer's epoch
// has caught up. An all-reduce of one piece costs two such phases and no
// MPI_Barrier. The descriptor each rank publishes (op, dtype, count, root and
// where its buffers are) lets every rank check that all ranks called the same
// collective with the same count before anything is read.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/cpu_communicator.h"
#include "comm/mpi_ring_transport.h"
#include "comm/ring_algorithms.h"
#include "core/check_mpi.h"
#include "ringtrain/core/check.h"

namespace ringtrain::comm_detail {

enum class OpKind : std::uint32_t { allreduce = 1, broadcast, allgather, reduce_scatter, barrier };

inline const char* kind_name(OpKind k) {
  switch (k) {
    case OpKind::allreduce:
      return "allreduce";
    case OpKind::broadcast:
      return "broadcast";
    case OpKind::allgather:
      return "allgather";
    case OpKind::reduce_scatter:
      return "reduce_scatter";
    case OpKind::barrier:
      return "barrier";
  }
  return "?";
}

// Where a buffer is: a region of the window (region >= 0) or staged (-1).
struct Location {
  std::int32_t region = -1;
  std::uint64_t offset = 0;
};

struct Descriptor {
  std::uint64_t seq;
  OpKind kind;
  DType dtype;
  ReduceOp op;
  std::int32_t root;
  std::uint64_t count;
  Location in, out;
};

struct alignas(64) Control {
  std::uint64_t epoch;
  alignas(64) Descriptor desc;
};

constexpr std::size_t kControlBytes = (sizeof(Control) + 63) / 64 * 64;
constexpr std::size_t kStagingBytes = std::size_t{4} << 20;

class ShmCommunicator final : public CpuCommunicator {
 public:
  ShmCommunicator(const Topology& topo, const CommOptions& options);

  ~ShmCommunicator() override;

  std::string_view name() const override { return "shm"; }

  BufferView allocate(std::size_t count, DType dtype) override;

 private:
  struct Region {
    MPI_Win win = MPI_WIN_NULL;
    std::vector<char*> base;  // per group rank
    std::size_t bytes = 0;
  };

  static void* query(MPI_Win win, int q) {
    MPI_Aint size = 0;
    int disp = 0;
    void* p = nullptr;
    RT_MPI_CHECK(MPI_Win_shared_query(win, q, &size, &disp, &p));
    return p;
  }

  Location locate(const void* p, std::size_t bytes) const {
    const char* c = static_cast<const char*>(p);
    for (std::size_t i = 0; i < regions_.size(); ++i) {
      const char* b = regions_[i].base[static_cast<std::size_t>(grank_)];
      if (c >= b && c + bytes <= b + regions_[i].bytes)
        return {static_cast<std::int32_t>(i), static_cast<std::uint64_t>(c - b)};
    }
    return {};
  }

  Control& mine() { return *control_[static_cast<std::size_t>(grank_)]; }
  const Descriptor& desc(int q) const { return control_[static_cast<std::size_t>(q)]->desc; }

  // Rank q's view of a location, or its staging area.
  char* resolve(int q, const Location& loc) const {
    if (loc.region < 0) return staging_[static_cast<std::size_t>(q)];
    return regions_[static_cast<std::size_t>(loc.region)].base[static_cast<std::size_t>(q)] +
           loc.offset;
  }

  void publish() {
    ++epoch_;
    std::atomic_ref<std::uint64_t>(mine().epoch).store(epoch_, std::memory_order_release);
  }

  void wait_group(const OpContext& ctx) {
    int next = 0;
    auto all_caught_up = [&] {
      for (; next < gsize_; ++next)
        if (std::atomic_ref<std::uint64_t>(control_[static_cast<std::size_t>(next)]->epoch)
                .load(std::memory_order_acquire) < epoch_)
          return false;
      return true;
    };
    if (spin_until(all_caught_up, ctx.deadline)) return;
    std::vector<int> late;
    for (int q = 0; q < gsize_; ++q)
      if (std::atomic_ref<std::uint64_t>(control_[static_cast<std::size_t>(q)]->epoch)
              .load(std::memory_order_acquire) < epoch_)
        late.push_back(world_of_[static_cast<std::size_t>(q)]);
    timed_out(ctx, fmt::format("rank(s) {} in shared memory", fmt::join(late, ", ")));
  }

  // Publishes this rank's descriptor (and staged input), waits for every rank
  // of the group, and checks that they all called the same collective.
  void arrive(const Descriptor& d, const OpContext& ctx) {
    mine().desc = d;
    publish();
    wait_group(ctx);
    for (int q = 0; q < gsize_; ++q) {
      const Descriptor& o = desc(q);
      const int wq = world_of_[static_cast<std::size_t>(q)];
      RT_CHECK(o.seq == d.seq && o.kind == d.kind,
               "shm: rank {} is in collective #{} ({}) while rank {} is in #{} ({}): the ranks "
               "issued different collectives",
               wq, o.seq, kind_name(o.kind), rank(), d.seq, kind_name(d.kind));
      RT_CHECK(o.count == d.count && o.dtype == d.dtype,
               "shm {} #{}: rank {} passed {} elements of {} but rank {} passed {} of {}: every "
               "rank must pass the same count and dtype",
               kind_name(d.kind), d.seq, wq, o.count, dtype_name(o.dtype), rank(), d.count,
               dtype_name(d.dtype));
      RT_CHECK(o.op == d.op && o.root == d.root,
               "shm {} #{}: rank {} used op {} root {} but rank {} op {} root {}",
               kind_name(d.kind), d.seq, wq, reduce_op_name(o.op), o.root, rank(),
               reduce_op_name(d.op), d.root);
    }
  }

  // Piece i of a collective that works in staging-size pieces: the first
  // piece arrives (publishes and checks the descriptors), later pieces only
  // wait for the group to have staged theirs.
  void begin_piece(std::size_t i, const Descriptor& d, const OpContext& ctx) {
    if (i == 0) return arrive(d, ctx);
    publish();
    wait_group(ctx);
  }

  // After arrive(): whether any rank of the group passes a buffer from
  // outside the window.
  bool any_staged() const {
    for (int q = 0; q < gsize_; ++q)
      if (desc(q).in.region < 0 || desc(q).out.region < 0) return true;
    return false;
  }

  Descriptor make_desc(const OpContext& ctx, OpKind kind, BufferView in, BufferView out,
                       ReduceOp op, int root) const {
    Descriptor d{};
    d.seq = ctx.seq;
    d.kind = kind;
    d.dtype = in.dtype;
    d.op = op;
    d.root = root;
    d.count = kind == OpKind::allgather ? in.count : kind == OpKind::barrier ? 0 : out.count;
    d.in = in.count > 0 ? locate(in.ptr, in.bytes()) : Location{};
    d.out = out.count > 0 ? locate(out.ptr, out.bytes()) : Location{};
    return d;
  }

  template <typename F>
  void guarded(const OpContext& ctx, F&& f) {
    try {
      f();
    } catch (const CommTimeout& e) {
      if (e.peer() < 0) throw;
      timed_out(ctx, fmt::format("rank {} of the inter-node ring", e.peer()));
    }
  }

  void run_allreduce(BufferView in, BufferView out, ReduceOp op, const OpContext& ctx) override;

  // Hierarchical step for one slice: reduce within the group into a private
  // buffer, all-reduce it over the ring of slice owners, write it to the group.
  void reduce_slice_across_groups(DType dtype, ReduceOp op, const std::vector<const void*>& srcs,
                                  const std::vector<void*>& dsts, std::size_t n,
                                  const OpContext& ctx);

  RingConfig ring_config() const { return RingConfig{options().ring_chunk_bytes}; }

  void run_broadcast(BufferView in, BufferView out, int root, const OpContext& ctx) override;

  // Group rank groot's `in` to every out of the group (root: the world root,
  // for the descriptor check).
  void group_broadcast(BufferView in, BufferView out, int groot, int root, const OpContext& ctx);

  void run_allgather(BufferView in, BufferView out, const OpContext& ctx) override;

  // Calls f(t, run, world) for the runs of [b, b + len) in column `column`'s
  // gathered order: element t is element t % count of the block of the
  // column's member number t / count, world rank `world`.
  template <typename F>
  void for_column_runs(int column, std::size_t count, std::size_t b, std::size_t len, F&& f) const {
    for (std::size_t t = b; t < b + len;) {
      const std::size_t index = t / count, e = t % count, run = std::min(count - e, b + len - t);
      f(t, run, world_at_[static_cast<std::size_t>(column * groups_) + index]);
      t += run;
    }
  }

  // Across groups: this rank's column ring gathers the blocks of its column
  // (one per group), then each group exchanges its columns through staging.
  void hierarchical_allgather(BufferView in, BufferView out, const OpContext& ctx);

  // Across groups: group rank l sums, over its group, the blocks bound for
  // the ranks of column l (through staging), then column l's ring
  // reduce-scatters those partial sums. 16-bit floats are summed in f32.
  void hierarchical_reduce_scatter(BufferView in, BufferView out, ReduceOp op,
                                   const OpContext& ctx);

  void run_reduce_scatter(BufferView in, BufferView out, ReduceOp op,
                          const OpContext& ctx) override;

  void run_barrier(const OpContext& ctx) override;

  MPI_Comm group_ = MPI_COMM_NULL;
  MPI_Comm cross_ = MPI_COMM_NULL;
  int grank_ = 0, gsize_ = 1, groups_ = 1;
  std::vector<int> world_of_;         // group rank -> world rank
  std::vector<int> grank_of_;         // world rank -> its group rank (its column)
  std::vector<int> column_index_of_;  // world rank -> its rank in its column's ring
  std::vector<int> world_at_;         // [column * groups_ + index] -> world rank
  MPI_Win control_win_ = MPI_WIN_NULL;
  std::vector<Control*> control_;
  std::vector<char*> staging_;
  std::vector<Region> regions_;
  std::uint64_t epoch_ = 0;
  std::unique_ptr<MpiRingTransport> cross_ring_;
  std::unique_ptr<MpiRingTransport> world_ring_;
  RingScratch ring_scratch_;
  std::vector<float> wide_;
  std::vector<char> slice_;
  std::vector<char> column_data_;  // hierarchical all-gather / reduce-scatter
  std::vector<float> column_wide_;
};
}  // namespace ringtrain::comm_detail
