// The shm backend within one node (one group): every rank's buffers are in one
// shared window, each rank reduces its own slice of all of them. See
// shm_communicator.h for the layout and the synchronisation.
#include "comm/shm_communicator.h"

#include <algorithm>
#include <cstring>

#include "comm/backends.h"
#include "comm/elementwise_reduce.h"
#include "launch/mpi_context.h"

namespace ringtrain::comm_detail {

namespace {

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

}  // namespace

ShmCommunicator::ShmCommunicator(const Topology& topo, const CommOptions& options)
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

ShmCommunicator::~ShmCommunicator() {
  stop_thread();
  cross_ring_.reset();
  world_ring_.reset();
  if (unwinding()) return;  // see unwinding() in comm/deadline.h
  for (auto& r : regions_) MPI_Win_free(&r.win);
  if (control_win_ != MPI_WIN_NULL) MPI_Win_free(&control_win_);
  MPI_Comm_free(&cross_);
  MPI_Comm_free(&group_);
}

BufferView ShmCommunicator::allocate(std::size_t count, DType dtype) {
  const std::size_t bytes = std::max<std::size_t>(count * dtype_size(dtype), 64);
  unsigned long long range[2] = {bytes, ~static_cast<unsigned long long>(bytes)};
  RT_MPI_CHECK(
      MPI_Allreduce(MPI_IN_PLACE, range, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, mpi_context::world()));
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

// ---------------------------------------------------------------- allreduce
void ShmCommunicator::run_allreduce(BufferView in, BufferView out, ReduceOp op,
                                    const OpContext& ctx) {
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

// ---------------------------------------------------------------- broadcast
void ShmCommunicator::run_broadcast(BufferView in, BufferView out, int root, const OpContext& ctx) {
  if (groups_ == 1)
    return group_broadcast(in, out, root, root, ctx);  // group ranks are world ranks
  const int column = grank_of_[static_cast<std::size_t>(root)];
  if (grank_ == column) {
    const int from = column_index_of_[static_cast<std::size_t>(root)];
    guarded(ctx, [&] { ring_broadcast(*cross_ring_, in, out, from, ring_config(), ctx.deadline); });
  }
  group_broadcast(out, out, column, root, ctx);
}

// Group rank groot's `in` to every out of the group (root: the world root,
// for the descriptor check).
void ShmCommunicator::group_broadcast(BufferView in, BufferView out, int groot, int root,
                                      const OpContext& ctx) {
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
void ShmCommunicator::run_allgather(BufferView in, BufferView out, const OpContext& ctx) {
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

// ----------------------------------------------------------- reduce_scatter
void ShmCommunicator::run_reduce_scatter(BufferView in, BufferView out, ReduceOp op,
                                         const OpContext& ctx) {
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
        std::memcpy(my_staging + q * len * es, static_cast<char*>(in.ptr) + (q * d.count + b) * es,
                    len * es);
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
void ShmCommunicator::run_barrier(const OpContext& ctx) {
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

std::unique_ptr<Communicator> make_shm_communicator(const Topology& topology,
                                                    const CommOptions& options) {
  return std::make_unique<ShmCommunicator>(topology, options);
}

}  // namespace ringtrain::comm_detail
