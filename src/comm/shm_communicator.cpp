// The "shm" backend: all-reduce through one node's shared memory.
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
//
// Across nodes (or groups, CommOptions::shm_group_size) it is hierarchical. A
// "column" is the ranks with the same rank in their group, one per group; each
// column has its own MPI ring, and the columns' rings run concurrently.
//   all-reduce: the owner of a slice reduces it within its group, all-reduces
//     it over its column's ring, then writes it into every buffer of its group.
//   reduce-scatter: group rank l sums, within its group, the blocks bound for
//     column l's ranks, then the column's ring reduce-scatters those sums.
//   all-gather: each column's ring gathers its members' blocks, then every
//     rank copies the other columns' blocks from its group peers.
//   broadcast: the root's column broadcasts over its ring, then each group
//     broadcasts from its member of that column.
// Inter-node traffic is that of one ring per column over S/n of the data, and
// within a node only shared memory is used.
#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/backends.h"
#include "comm/cpu_communicator.h"
#include "comm/elementwise_reduce.h"
#include "comm/mpi_ring_transport.h"
#include "comm/ring_algorithms.h"
#include "core/check_mpi.h"
#include "launch/mpi_context.h"
#include "ringtrain/core/check.h"

namespace ringtrain::comm_detail {

namespace {

enum class OpKind : std::uint32_t { allreduce = 1, broadcast, allgather, reduce_scatter, barrier };

const char* kind_name(OpKind k) {
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

MPI_Info noncontig_info() {
  // Each rank's part starts on its own page: no false sharing, first touch local.
  MPI_Info info;
  MPI_Info_create(&info);
  MPI_Info_set(info, "alloc_shared_noncontig", "true");
  return info;
}

// Open MPI's shared segments start 8 bytes into a page: align every part to a
// cache line. Mappings are page-aligned, so every rank rounds a peer's address
// to the same byte.
constexpr std::size_t kAlign = 64;
char* align_up(void* p) {
  const auto u = reinterpret_cast<std::uintptr_t>(p);
  return reinterpret_cast<char*>((u + kAlign - 1) / kAlign * kAlign);
}

struct Slice {
  std::size_t offset, length;
};
Slice slice_of(std::size_t count, int parts, int index) {
  const std::size_t p = static_cast<std::size_t>(parts), i = static_cast<std::size_t>(index);
  // Slices start on 64-byte multiples of elements where possible, so two
  // owners never write the same cache line: round the base share up to 16.
  std::size_t share = (count + p - 1) / p;
  share = (share + 15) / 16 * 16;
  const std::size_t begin = std::min(count, i * share);
  return {begin, std::min(count, begin + share) - begin};
}

class ShmCommunicator final : public CpuCommunicator {
 public:
  ShmCommunicator(const Topology& topo, const CommOptions& options)
      : CpuCommunicator(topo.rank(), topo.world_size(), options, mpi_context::local(),
                        mpi_context::world()) {
    MPI_Comm local = mpi_context::local();
    int local_rank = 0, local_size = 1;
    RT_MPI_CHECK(MPI_Comm_rank(local, &local_rank));
    RT_MPI_CHECK(MPI_Comm_size(local, &local_size));
    const int group_size =
        options.shm_group_size > 0 ? std::min(options.shm_group_size, local_size) : local_size;
    RT_MPI_CHECK(MPI_Comm_split(local, local_rank / group_size, local_rank, &group_));
    RT_MPI_CHECK(MPI_Comm_rank(group_, &grank_));
    RT_MPI_CHECK(MPI_Comm_size(group_, &gsize_));
    int sizes[2] = {gsize_, -gsize_};
    RT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, sizes, 2, MPI_INT, MPI_MAX, mpi_context::world()));
    RT_CHECK(sizes[0] == -sizes[1],
             "--backend shm across nodes needs the same number of ranks on every node (found "
             "groups of {} and {} ranks); use --backend ring",
             -sizes[1], sizes[0]);
    RT_MPI_CHECK(MPI_Comm_split(mpi_context::world(), grank_, rank(), &cross_));
    RT_MPI_CHECK(MPI_Comm_size(cross_, &groups_));
    int column_place[2] = {grank_, 0};
    RT_MPI_CHECK(MPI_Comm_rank(cross_, &column_place[1]));
    std::vector<int> places(2 * static_cast<std::size_t>(size()));
    RT_MPI_CHECK(
        MPI_Allgather(column_place, 2, MPI_INT, places.data(), 2, MPI_INT, mpi_context::world()));
    grank_of_.resize(static_cast<std::size_t>(size()));
    column_index_of_.resize(static_cast<std::size_t>(size()));
    world_at_.assign(static_cast<std::size_t>(gsize_) * static_cast<std::size_t>(groups_), -1);
    for (int w = 0; w < size(); ++w) {
      const std::size_t i = static_cast<std::size_t>(w);
      grank_of_[i] = places[2 * i];
      column_index_of_[i] = places[2 * i + 1];
      world_at_[static_cast<std::size_t>(grank_of_[i] * groups_ + column_index_of_[i])] = w;
    }
    MPI_Comm_set_errhandler(group_, MPI_ERRORS_RETURN);
    MPI_Comm_set_errhandler(cross_, MPI_ERRORS_RETURN);

    MPI_Group g_group, g_world;
    RT_MPI_CHECK(MPI_Comm_group(group_, &g_group));
    RT_MPI_CHECK(MPI_Comm_group(mpi_context::world(), &g_world));
    std::vector<int> ids(static_cast<std::size_t>(gsize_));
    for (int q = 0; q < gsize_; ++q) ids[static_cast<std::size_t>(q)] = q;
    world_of_.resize(ids.size());
    RT_MPI_CHECK(MPI_Group_translate_ranks(g_group, gsize_, ids.data(), g_world, world_of_.data()));
    MPI_Group_free(&g_group);
    MPI_Group_free(&g_world);

    MPI_Info info = noncontig_info();
    void* base = nullptr;
    RT_MPI_CHECK(
        MPI_Win_allocate_shared(static_cast<MPI_Aint>(kControlBytes + kStagingBytes + kAlign), 1,
                                info, group_, &base, &control_win_));
    MPI_Info_free(&info);
    std::memset(align_up(base), 0, kControlBytes);
    control_.resize(static_cast<std::size_t>(gsize_));
    staging_.resize(static_cast<std::size_t>(gsize_));
    for (int q = 0; q < gsize_; ++q) {
      char* p = align_up(query(control_win_, q));
      control_[static_cast<std::size_t>(q)] = reinterpret_cast<Control*>(p);
      staging_[static_cast<std::size_t>(q)] = p + kControlBytes;
    }
    if (groups_ > 1) {
      cross_ring_ = std::make_unique<MpiRingTransport>(cross_);
      world_ring_ = std::make_unique<MpiRingTransport>(mpi_context::world());
    }
    RT_MPI_CHECK(MPI_Barrier(group_));
  }

  ~ShmCommunicator() override {
    stop_thread();
    cross_ring_.reset();
    world_ring_.reset();
    if (unwinding()) return;  // see unwinding() in comm/deadline.h
    for (auto& r : regions_) MPI_Win_free(&r.win);
    if (control_win_ != MPI_WIN_NULL) MPI_Win_free(&control_win_);
    MPI_Comm_free(&cross_);
    MPI_Comm_free(&group_);
  }

  std::string_view name() const override { return "shm"; }

  BufferView allocate(std::size_t count, DType dtype) override {
    const std::size_t bytes = std::max<std::size_t>(count * dtype_size(dtype), 64);
    unsigned long long range[2] = {bytes, ~static_cast<unsigned long long>(bytes)};
    RT_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX,
                               mpi_context::world()));
    RT_CHECK(range[0] == ~range[1],
             "shm allocate is collective: every rank must ask for the same size, but requests "
             "ranged from {} to {} bytes",
             ~range[1], range[0]);
    Region region;
    MPI_Info info = noncontig_info();
    void* base = nullptr;
    RT_MPI_CHECK(MPI_Win_allocate_shared(static_cast<MPI_Aint>(bytes + kAlign), 1, info, group_,
                                         &base, &region.win));
    MPI_Info_free(&info);
    region.bytes = bytes;
    for (int q = 0; q < gsize_; ++q) region.base.push_back(align_up(query(region.win, q)));
    regions_.push_back(std::move(region));
    return {align_up(base), count, dtype, Device::cpu()};
  }

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

  // ---------------------------------------------------------------- allreduce
  void run_allreduce(BufferView in, BufferView out, ReduceOp op, const OpContext& ctx) override {
    const std::size_t es = dtype_size(in.dtype);
    const Descriptor d = make_desc(ctx, OpKind::allreduce, in, out, op, 0);
    const bool in_staged = d.in.region < 0, out_staged = d.out.region < 0;
    // Staged buffers go through the staging area piece by piece. When every
    // rank's buffers are in the window the whole slice is one piece: two
    // synchronisations in all, and one long stream per buffer. A rank that
    // stages has copied piece 0 in before it arrives, so pieces start at 0
    // either way; the size is agreed once the descriptors are visible. Across
    // groups the other groups' descriptors are not visible, and the slice
    // owners' rings must see equal pieces, so hierarchical runs always piece.
    std::size_t piece = kStagingBytes / es;
    char* my_staging = staging_[static_cast<std::size_t>(grank_)];
    std::vector<const void*> srcs(static_cast<std::size_t>(gsize_));
    std::vector<void*> dsts(static_cast<std::size_t>(gsize_));
    std::size_t pieces = 1;
    bool staged = true;
    for (std::size_t i = 0; i < pieces; ++i) {
      const std::size_t b = i * piece;
      std::size_t len = std::min(piece, d.count - std::min(d.count, b));
      if (in_staged && len > 0)
        std::memcpy(my_staging, static_cast<char*>(in.ptr) + b * es, len * es);
      if (i == 0) {
        arrive(d, ctx);
        staged = any_staged();
        if (!staged && groups_ == 1) {
          piece = std::max<std::size_t>(d.count, 1);
          len = d.count;
        }
        pieces = std::max<std::size_t>(1, (d.count + piece - 1) / piece);
      } else {
        publish();
        wait_group(ctx);
      }
      const Slice s = slice_of(len, gsize_, grank_);
      for (int q = 0; q < gsize_; ++q) {
        const Descriptor& o = desc(q);
        const std::size_t in_at = (o.in.region < 0 ? 0 : b) + s.offset;
        const std::size_t out_at = (o.out.region < 0 ? 0 : b) + s.offset;
        srcs[static_cast<std::size_t>(q)] = resolve(q, o.in) + in_at * es;
        dsts[static_cast<std::size_t>(q)] = resolve(q, o.out) + out_at * es;
      }
      if (groups_ == 1) {
        // Staged results are copied out again at once: keep them in cache.
        reduce_to_many(d.dtype, op, srcs.data(), gsize_, dsts.data(), gsize_, s.length, size(),
                       StoreHint{.may_stream = !staged, .local_dst = grank_});
      } else {
        guarded(ctx, [&] { reduce_slice_across_groups(d.dtype, op, srcs, dsts, s.length, ctx); });
      }
      publish();
      wait_group(ctx);
      if (out_staged && len > 0)
        std::memcpy(static_cast<char*>(out.ptr) + b * es, my_staging, len * es);
    }
  }

  // Hierarchical step for one slice: reduce within the group into a private
  // buffer, all-reduce it over the ring of slice owners, write it to the group.
  void reduce_slice_across_groups(DType dtype, ReduceOp op, const std::vector<const void*>& srcs,
                                  const std::vector<void*>& dsts, std::size_t n,
                                  const OpContext& ctx) {
    const ReduceOp partial = op == ReduceOp::avg ? ReduceOp::sum : op;
    const std::size_t es = dtype_size(dtype);
    if (is_16bit_float(dtype)) {
      wide_.resize(2 * n);
      float* acc = wide_.data();
      float* tmp = acc + n;
      widen_to_f32(dtype, srcs[0], acc, n);
      for (int q = 1; q < gsize_; ++q) {
        widen_to_f32(dtype, srcs[static_cast<std::size_t>(q)], tmp, n);
        combine(DType::f32, partial, acc, acc, tmp, n);
      }
      const BufferView v{acc, n, DType::f32, Device::cpu()};
      ring_allreduce(*cross_ring_, v, v, partial, ring_config(), ctx.deadline, ring_scratch_);
      if (op == ReduceOp::avg) divide(DType::f32, acc, n, size());
      slice_.resize(n * es);
      narrow_from_f32(dtype, acc, slice_.data(), n);
    } else {
      slice_.resize(n * es);
      void* one[1] = {slice_.data()};
      reduce_to_many(dtype, partial, srcs.data(), gsize_, one, 1, n, 1,
                     StoreHint{.may_stream = false});
      const BufferView v{slice_.data(), n, dtype, Device::cpu()};
      ring_allreduce(*cross_ring_, v, v, partial, ring_config(), ctx.deadline, ring_scratch_);
      if (op == ReduceOp::avg) divide(dtype, slice_.data(), n, size());
    }
    for (void* dst : dsts)
      if (n > 0) std::memcpy(dst, slice_.data(), n * es);
  }

  RingConfig ring_config() const { return RingConfig{options().ring_chunk_bytes}; }

  // ---------------------------------------------------------------- broadcast
  void run_broadcast(BufferView in, BufferView out, int root, const OpContext& ctx) override {
    if (groups_ == 1)
      return group_broadcast(in, out, root, root, ctx);  // group ranks are world ranks
    const int column = grank_of_[static_cast<std::size_t>(root)];
    if (grank_ == column) {
      const int from = column_index_of_[static_cast<std::size_t>(root)];
      guarded(ctx,
              [&] { ring_broadcast(*cross_ring_, in, out, from, ring_config(), ctx.deadline); });
    }
    group_broadcast(out, out, column, root, ctx);
  }

  // Group rank groot's `in` to every out of the group (root: the world root,
  // for the descriptor check).
  void group_broadcast(BufferView in, BufferView out, int groot, int root, const OpContext& ctx) {
    const bool am_root = grank_ == groot;
    const std::size_t es = dtype_size(out.dtype);
    const std::size_t piece = kStagingBytes / es;
    BufferView src = am_root ? in : out;
    const Descriptor d = make_desc(ctx, OpKind::broadcast, src, out, ReduceOp::sum, root);
    const std::size_t pieces = std::max<std::size_t>(1, (d.count + piece - 1) / piece);
    char* my_staging = staging_[static_cast<std::size_t>(grank_)];
    for (std::size_t i = 0; i < pieces; ++i) {
      const std::size_t b = i * piece, len = std::min(piece, d.count - std::min(d.count, b));
      if (am_root && d.in.region < 0 && len > 0)
        std::memcpy(my_staging, static_cast<char*>(in.ptr) + b * es, len * es);
      begin_piece(i, d, ctx);
      const Descriptor& r = desc(groot);
      const char* from = resolve(groot, r.in) + (r.in.region < 0 ? 0 : b) * es;
      char* to = static_cast<char*>(out.ptr) + b * es;
      if (len > 0 && from != to) std::memcpy(to, from, len * es);
      publish();
      wait_group(ctx);
    }
  }

  // ---------------------------------------------------------------- allgather
  void run_allgather(BufferView in, BufferView out, const OpContext& ctx) override {
    if (groups_ > 1) return hierarchical_allgather(in, out, ctx);
    const std::size_t es = dtype_size(in.dtype);
    const std::size_t piece = kStagingBytes / es;
    const Descriptor d = make_desc(ctx, OpKind::allgather, in, out, ReduceOp::sum, 0);
    const std::size_t pieces = std::max<std::size_t>(1, (d.count + piece - 1) / piece);
    char* my_staging = staging_[static_cast<std::size_t>(grank_)];
    for (std::size_t i = 0; i < pieces; ++i) {
      const std::size_t b = i * piece, len = std::min(piece, d.count - std::min(d.count, b));
      if (d.in.region < 0 && len > 0)
        std::memcpy(my_staging, static_cast<char*>(in.ptr) + b * es, len * es);
      begin_piece(i, d, ctx);
      for (int q = 0; q < gsize_; ++q) {
        const Descriptor& o = desc(q);
        const char* from = resolve(q, o.in) + (o.in.region < 0 ? 0 : b) * es;
        char* to = static_cast<char*>(out.ptr) + (static_cast<std::size_t>(q) * d.count + b) * es;
        if (len > 0 && from != to) std::memcpy(to, from, len * es);
      }
      publish();
      wait_group(ctx);
    }
  }

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
  void hierarchical_allgather(BufferView in, BufferView out, const OpContext& ctx) {
    const std::size_t es = dtype_size(in.dtype), count = in.count;
    const std::size_t total = count * static_cast<std::size_t>(groups_);
    column_data_.resize(std::max(column_data_.size(), total * es));
    const BufferView gathered{column_data_.data(), total, in.dtype, Device::cpu()};
    guarded(ctx, [&] { ring_allgather(*cross_ring_, in, gathered, ring_config(), ctx.deadline); });
    Descriptor d = make_desc(ctx, OpKind::allgather, in, out, ReduceOp::sum, 0);
    d.in = d.out = Location{};  // always through staging: the gathered blocks are private
    const std::size_t piece = kStagingBytes / es;
    const std::size_t pieces = std::max<std::size_t>(1, (total + piece - 1) / piece);
    char* o = static_cast<char*>(out.ptr);
    for (std::size_t i = 0; i < pieces; ++i) {
      const std::size_t b = i * piece, len = std::min(piece, total - std::min(total, b));
      if (len > 0)
        std::memcpy(staging_[static_cast<std::size_t>(grank_)], column_data_.data() + b * es,
                    len * es);
      begin_piece(i, d, ctx);
      for (int q = 0; q < gsize_; ++q) {
        const char* from = staging_[static_cast<std::size_t>(q)];
        for_column_runs(q, count, b, len, [&](std::size_t t, std::size_t run, int w) {
          std::memcpy(o + (static_cast<std::size_t>(w) * count + t % count) * es,
                      from + (t - b) * es, run * es);
        });
      }
      publish();
      wait_group(ctx);
    }
  }

  // Across groups: group rank l sums, over its group, the blocks bound for
  // the ranks of column l (through staging), then column l's ring
  // reduce-scatters those partial sums. 16-bit floats are summed in f32.
  void hierarchical_reduce_scatter(BufferView in, BufferView out, ReduceOp op,
                                   const OpContext& ctx) {
    const std::size_t es = dtype_size(in.dtype), count = out.count;
    const std::size_t total = count * static_cast<std::size_t>(groups_);
    const bool wide = is_16bit_float(in.dtype);
    const DType acc_type = wide ? DType::f32 : in.dtype;
    const std::size_t acc_es = dtype_size(acc_type);
    const ReduceOp partial = op == ReduceOp::avg ? ReduceOp::sum : op;
    column_data_.resize(std::max(column_data_.size(), total * acc_es));
    char* acc = column_data_.data();
    Descriptor d = make_desc(ctx, OpKind::reduce_scatter, in, out, op, 0);
    d.in = d.out = Location{};
    const std::size_t n = static_cast<std::size_t>(gsize_);
    const std::size_t piece = kStagingBytes / (es * n);
    const std::size_t pieces = std::max<std::size_t>(1, (total + piece - 1) / piece);
    const char* src = static_cast<const char*>(in.ptr);
    std::vector<const void*> srcs(n);
    for (std::size_t i = 0; i < pieces; ++i) {
      const std::size_t b = i * piece, len = std::min(piece, total - std::min(total, b));
      // Staging holds, for every column l in turn, what column l's owner needs.
      char* my_staging = staging_[static_cast<std::size_t>(grank_)];
      for (int l = 0; l < gsize_; ++l)
        for_column_runs(l, count, b, len, [&](std::size_t t, std::size_t run, int w) {
          std::memcpy(my_staging + (static_cast<std::size_t>(l) * len + t - b) * es,
                      src + (static_cast<std::size_t>(w) * count + t % count) * es, run * es);
        });
      begin_piece(i, d, ctx);
      for (std::size_t q = 0; q < n; ++q)
        srcs[q] = staging_[q] + static_cast<std::size_t>(grank_) * len * es;
      if (len > 0 && wide) {
        float* a = reinterpret_cast<float*>(acc) + b;
        column_wide_.resize(len);
        widen_to_f32(in.dtype, srcs[0], a, len);
        for (std::size_t q = 1; q < n; ++q) {
          widen_to_f32(in.dtype, srcs[q], column_wide_.data(), len);
          combine(DType::f32, partial, a, a, column_wide_.data(), len);
        }
      } else if (len > 0) {
        void* dst[1] = {acc + b * es};
        reduce_to_many(in.dtype, partial, srcs.data(), gsize_, dst, 1, len, 1,
                       StoreHint{.may_stream = false});
      }
      publish();
      wait_group(ctx);
    }
    if (wide) column_wide_.resize(count);
    const BufferView sums{acc, total, acc_type, Device::cpu()};
    const BufferView mine =
        wide ? BufferView{column_wide_.data(), count, DType::f32, Device::cpu()} : out;
    guarded(ctx, [&] {
      ring_reduce_scatter(*cross_ring_, sums, mine, partial, ring_config(), ctx.deadline,
                          ring_scratch_);
    });
    if (op == ReduceOp::avg) divide(acc_type, mine.ptr, count, size());
    if (wide) narrow_from_f32(in.dtype, column_wide_.data(), out.ptr, count);
  }

  // ----------------------------------------------------------- reduce_scatter
  void run_reduce_scatter(BufferView in, BufferView out, ReduceOp op,
                          const OpContext& ctx) override {
    if (groups_ > 1) return hierarchical_reduce_scatter(in, out, op, ctx);
    const std::size_t es = dtype_size(in.dtype);
    const std::size_t n = static_cast<std::size_t>(gsize_);
    const std::size_t piece = kStagingBytes / (es * n);
    const Descriptor d = make_desc(ctx, OpKind::reduce_scatter, in, out, op, 0);
    const std::size_t pieces = std::max<std::size_t>(1, (d.count + piece - 1) / piece);
    char* my_staging = staging_[static_cast<std::size_t>(grank_)];
    std::vector<const void*> srcs(n);
    for (std::size_t i = 0; i < pieces; ++i) {
      const std::size_t b = i * piece, len = std::min(piece, d.count - std::min(d.count, b));
      if (d.in.region < 0 && len > 0)
        for (std::size_t q = 0; q < n; ++q)
          std::memcpy(my_staging + q * len * es,
                      static_cast<char*>(in.ptr) + (q * d.count + b) * es, len * es);
      begin_piece(i, d, ctx);
      const std::size_t me = static_cast<std::size_t>(grank_);
      for (int q = 0; q < gsize_; ++q) {
        const Descriptor& o = desc(q);
        const std::size_t at = o.in.region < 0 ? me * len : me * d.count + b;
        srcs[static_cast<std::size_t>(q)] = resolve(q, o.in) + at * es;
      }
      void* dst[1] = {static_cast<char*>(out.ptr) + b * es};
      reduce_to_many(d.dtype, op, srcs.data(), gsize_, dst, 1, len, size(),
                     StoreHint{.local_dst = 0});
      publish();
      wait_group(ctx);
    }
  }

  // ------------------------------------------------------------------ barrier
  void run_barrier(const OpContext& ctx) override {
    if (groups_ > 1) {
      guarded(ctx, [&] { ring_barrier(*world_ring_, ctx.deadline, ring_scratch_); });
      return;
    }
    const BufferView none{nullptr, 0, DType::f32, Device::cpu()};
    arrive(make_desc(ctx, OpKind::barrier, none, none, ReduceOp::sum, 0), ctx);
    // A second phase: nobody may overwrite its descriptor (the next collective)
    // while a peer is still checking this one.
    publish();
    wait_group(ctx);
  }

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

}  // namespace

std::unique_ptr<Communicator> make_shm_communicator(const Topology& topology,
                                                    const CommOptions& options) {
  return std::make_unique<ShmCommunicator>(topology, options);
}

}  // namespace ringtrain::comm_detail
