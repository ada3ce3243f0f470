// The shm backend across nodes (or groups, CommOptions::shm_group_size) is
// hierarchical. A "column" is the ranks with the same rank in their group, one
// per group; each column has its own MPI ring, and the columns' rings run
// concurrently.
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
#include <algorithm>
#include <cstring>

#include "comm/elementwise_reduce.h"
#include "comm/shm_communicator.h"

namespace ringtrain::comm_detail {

// Hierarchical step for one slice: reduce within the group into a private
// buffer, all-reduce it over the ring of slice owners, write it to the group.
void ShmCommunicator::reduce_slice_across_groups(DType dtype, ReduceOp op,
                                                 const std::vector<const void*>& srcs,
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

// Across groups: this rank's column ring gathers the blocks of its column
// (one per group), then each group exchanges its columns through staging.
void ShmCommunicator::hierarchical_allgather(BufferView in, BufferView out, const OpContext& ctx) {
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
        std::memcpy(o + (static_cast<std::size_t>(w) * count + t % count) * es, from + (t - b) * es,
                    run * es);
      });
    }
    publish();
    wait_group(ctx);
  }
}

// Across groups: group rank l sums, over its group, the blocks bound for
// the ranks of column l (through staging), then column l's ring
// reduce-scatters those partial sums. 16-bit floats are summed in f32.
void ShmCommunicator::hierarchical_reduce_scatter(BufferView in, BufferView out, ReduceOp op,
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

}  // namespace ringtrain::comm_detail
