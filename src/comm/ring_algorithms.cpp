// The ring. With n ranks the buffer is cut into n segments; segment sizes differ
// by at most one element when the count does not divide. Each segment travels
// in chunks, so a rank forwards chunk k while chunk k+1 is still on the wire.
//
//   n = 4, segments A B C D; rank r sends right to r+1, receives from r-1.
//
//          +---------+   +---------+   +---------+   +---------+
//     +--->| rank 0  |-->| rank 1  |-->| rank 2  |-->| rank 3  |---+
//     |    +---------+   +---------+   +---------+   +---------+   |
//     +------------------------------------------------------------+
//
//   Reduce-scatter, step s = 0..n-2: rank r sends segment (r - s) and receives
//   segment (r - s - 1), which it adds to its own copy and passes on in the
//   next step. After n-1 steps rank r holds the full sum of segment (r + 1):
//
//     step 0   r0: A ->  r1: B ->  r2: C ->  r3: D -> (r0)
//     step 1   r0: D+.   r1: A+.   r2: B+.   r3: C+.
//     step 2   r0: C+..  r1: D+..  r2: A+..  r3: B+..
//     result   r0 owns B, r1 owns C, r2 owns D, r3 owns A (each summed over 4 ranks)
//
//   All-gather, step s = 0..n-2: rank r sends segment (r + 1 - s) and receives
//   segment (r - s) straight into the output, which it forwards in the next
//   step. Each rank sends (n-1) segments per phase: 2(n-1)/n * S bytes in all.
//
// Receives are posted one step ahead into a double buffer, so a message lands
// in a posted buffer (no unexpected-message copy) and the reduction of chunk k
// overlaps the arrival of chunk k+1. f16/bf16 travel widened to f32 so that the
// partial sums keep f32 precision.
#include "comm/ring_algorithms.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "comm/elementwise_reduce.h"
#include "ringtrain/core/check.h"

namespace ringtrain::comm_detail {

namespace {

int wrap(int a, int n) {
  return ((a % n) + n) % n;
}

// n segments of a buffer: balanced (all-reduce) or fixed blocks (reduce-scatter,
// all-gather).
struct Segments {
  std::size_t count = 0;
  int n = 1;
  bool blocks = false;
  std::size_t block = 0;

  static Segments balanced(std::size_t count, int n) { return {count, n, false, 0}; }
  static Segments of_blocks(std::size_t block, int n) {
    return {block * static_cast<std::size_t>(n), n, true, block};
  }
  std::size_t offset(int q) const {
    if (blocks) return static_cast<std::size_t>(q) * block;
    const std::size_t base = count / static_cast<std::size_t>(n),
                      rem = count % static_cast<std::size_t>(n);
    return static_cast<std::size_t>(q) * base + std::min(static_cast<std::size_t>(q), rem);
  }
  std::size_t length(int q) const {
    if (blocks) return block;
    const std::size_t base = count / static_cast<std::size_t>(n),
                      rem = count % static_cast<std::size_t>(n);
    return base + (static_cast<std::size_t>(q) < rem ? 1 : 0);
  }
  std::size_t max_length() const { return length(0); }
};

using Transfers = std::vector<std::unique_ptr<RingTransfer>>;

void wait_all(RingTransport& t, Transfers& list, int peer, const Deadline& deadline) {
  for (auto& x : list) t.wait(*x, peer, deadline);
  list.clear();
}

std::size_t chunk_elems(const RingConfig& c, std::size_t es) {
  return std::max<std::size_t>(1, c.chunk_bytes / es);
}

// Reduce-scatter phase (see the diagram, shifted by `shift`). After it, segment
// wrap(r + 1 + shift) is complete at owned_dst; partial sums go to `work`.
void reduce_scatter_phase(RingTransport& t, DType dt, ReduceOp op, const char* in, char* work,
                          char* owned_dst, const Segments& seg, int shift, std::size_t ce,
                          const Deadline& deadline, RingScratch& scratch) {
  const int n = t.size(), r = t.rank(), right = wrap(r + 1, n), left = wrap(r - 1, n);
  const std::size_t es = dtype_size(dt);
  for (auto& b : scratch.recv) b.resize(std::max<std::size_t>(b.size(), seg.max_length() * es));
  Transfers sends, recvs[2];
  auto chunks_of = [&](int q, auto&& f) {
    const std::size_t len = seg.length(q);
    for (std::size_t off = 0; off < len; off += ce) f(off, std::min(ce, len - off));
  };
  // The last step's chunks can land straight in owned_dst and be reduced
  // there, unless owned_dst is this rank's own input (in place): that skips a
  // scratch buffer of S/n bytes, all of it for n = 2.
  const int b_last = wrap(r - (n - 2) - 1 + shift, n);
  const bool direct_last = owned_dst != in + seg.offset(b_last) * es;
  auto recv_buffer = [&](int step) {
    return step == n - 2 && direct_last ? owned_dst : scratch.recv[step % 2].data();
  };
  auto post_recvs = [&](int step) {
    const int q = wrap(r - step - 1 + shift, n);
    char* buf = recv_buffer(step);
    recvs[step % 2].clear();
    chunks_of(q, [&](std::size_t off, std::size_t len) {
      recvs[step % 2].push_back(t.irecv(left, buf + off * es, len * es));
    });
  };
  post_recvs(0);
  const int a0 = wrap(r + shift, n);
  chunks_of(a0, [&](std::size_t off, std::size_t len) {
    sends.push_back(t.isend(right, in + (seg.offset(a0) + off) * es, len * es));
  });
  for (int s = 0; s <= n - 2; ++s) {
    const bool last = s == n - 2;
    if (!last) post_recvs(s + 1);
    const int b = wrap(r - s - 1 + shift, n);
    char* dst = last ? owned_dst : work + seg.offset(b) * es;
    const char* mine = in + seg.offset(b) * es;
    const char* got = recv_buffer(s);
    std::size_t k = 0;
    chunks_of(b, [&](std::size_t off, std::size_t len) {
      t.wait(*recvs[s % 2][k++], left, deadline);
      combine(dt, op, dst + off * es, got + off * es, mine + off * es, len);
      // This segment is what the next step sends: forward the chunk now.
      if (!last) sends.push_back(t.isend(right, dst + off * es, len * es));
    });
  }
  wait_all(t, sends, right, deadline);
}

// All-gather phase: segment `owned` is in out; afterwards every segment is.
void allgather_phase(RingTransport& t, char* out, std::size_t es, const Segments& seg, int owned,
                     std::size_t ce, const Deadline& deadline) {
  const int n = t.size(), r = t.rank(), right = wrap(r + 1, n), left = wrap(r - 1, n);
  (void)r;
  Transfers sends;
  std::vector<Transfers> recvs(static_cast<std::size_t>(n));
  auto chunks_of = [&](int q, auto&& f) {
    const std::size_t len = seg.length(q);
    for (std::size_t off = 0; off < len; off += ce) f(off, std::min(ce, len - off));
  };
  // Every segment lands in its own place in out, so all receives go up front.
  for (int s = 0; s <= n - 2; ++s) {
    const int q = wrap(owned - s - 1, n);
    chunks_of(q, [&](std::size_t off, std::size_t len) {
      recvs[static_cast<std::size_t>(s)].push_back(
          t.irecv(left, out + (seg.offset(q) + off) * es, len * es));
    });
  }
  chunks_of(owned, [&](std::size_t off, std::size_t len) {
    sends.push_back(t.isend(right, out + (seg.offset(owned) + off) * es, len * es));
  });
  for (int s = 0; s <= n - 2; ++s) {
    const int q = wrap(owned - s - 1, n);
    std::size_t k = 0;
    chunks_of(q, [&](std::size_t off, std::size_t len) {
      t.wait(*recvs[static_cast<std::size_t>(s)][k++], left, deadline);
      if (s < n - 2) sends.push_back(t.isend(right, out + (seg.offset(q) + off) * es, len * es));
    });
  }
  wait_all(t, sends, right, deadline);
}

void copy_if_distinct(BufferView in, BufferView out) {
  if (in.ptr != out.ptr && in.count > 0) std::memcpy(out.ptr, in.ptr, in.bytes());
}

}  // namespace

void ring_allreduce(RingTransport& t, BufferView in, BufferView out, ReduceOp op,
                    const RingConfig& config, const Deadline& deadline, RingScratch& scratch) {
  const int n = t.size();
  if (n == 1 || in.count == 0) {
    copy_if_distinct(in, out);
    return;
  }
  if (is_16bit_float(in.dtype)) {
    scratch.wide_out.resize(in.count);
    widen_to_f32(in.dtype, in.ptr, scratch.wide_out.data(), in.count);
    const BufferView wide{scratch.wide_out.data(), in.count, DType::f32, in.device};
    ring_allreduce(t, wide, wide, op, config, deadline, scratch);
    narrow_from_f32(in.dtype, scratch.wide_out.data(), out.ptr, in.count);
    return;
  }
  const std::size_t es = dtype_size(in.dtype);
  const Segments seg = Segments::balanced(in.count, n);
  const int owned = wrap(t.rank() + 1, n);
  char* o = static_cast<char*>(out.ptr);
  char* owned_dst = o + seg.offset(owned) * es;
  reduce_scatter_phase(t, in.dtype, op, static_cast<const char*>(in.ptr), o, owned_dst, seg, 0,
                       chunk_elems(config, es), deadline, scratch);
  if (op == ReduceOp::avg) divide(in.dtype, owned_dst, seg.length(owned), n);
  allgather_phase(t, o, es, seg, owned, chunk_elems(config, es), deadline);
}

void ring_reduce_scatter(RingTransport& t, BufferView in, BufferView out, ReduceOp op,
                         const RingConfig& config, const Deadline& deadline, RingScratch& scratch) {
  const int n = t.size();
  if (n == 1 || out.count == 0) {
    copy_if_distinct(in, out);
    return;
  }
  if (is_16bit_float(in.dtype)) {
    std::vector<float> wide_in(in.count);
    widen_to_f32(in.dtype, in.ptr, wide_in.data(), in.count);
    scratch.wide_out.resize(out.count);
    ring_reduce_scatter(t, {wide_in.data(), in.count, DType::f32, in.device},
                        {scratch.wide_out.data(), out.count, DType::f32, out.device}, op, config,
                        deadline, scratch);
    narrow_from_f32(in.dtype, scratch.wide_out.data(), out.ptr, out.count);
    return;
  }
  const std::size_t es = dtype_size(in.dtype);
  const Segments seg = Segments::of_blocks(out.count, n);
  scratch.work.resize(std::max(scratch.work.size(), in.bytes()));
  // Shift -1: rank r ends up owning block r.
  reduce_scatter_phase(t, in.dtype, op, static_cast<const char*>(in.ptr), scratch.work.data(),
                       static_cast<char*>(out.ptr), seg, -1, chunk_elems(config, es), deadline,
                       scratch);
  if (op == ReduceOp::avg) divide(in.dtype, out.ptr, out.count, n);
}

void ring_allgather(RingTransport& t, BufferView in, BufferView out, const RingConfig& config,
                    const Deadline& deadline) {
  const int n = t.size();
  const std::size_t es = dtype_size(in.dtype);
  char* mine = static_cast<char*>(out.ptr) + static_cast<std::size_t>(t.rank()) * in.bytes();
  if (in.ptr != mine && in.count > 0) std::memcpy(mine, in.ptr, in.bytes());
  if (n == 1 || in.count == 0) return;
  allgather_phase(t, static_cast<char*>(out.ptr), es, Segments::of_blocks(in.count, n), t.rank(),
                  chunk_elems(config, es), deadline);
}

void ring_broadcast(RingTransport& t, BufferView in, BufferView out, int root,
                    const RingConfig& config, const Deadline& deadline) {
  const int n = t.size(), r = t.rank(), right = wrap(r + 1, n), left = wrap(r - 1, n);
  if (r == root) copy_if_distinct(in, out);
  if (n == 1 || out.count == 0) return;
  // A chain from the root around the ring, pipelined by chunks.
  const int position = wrap(r - root, n);
  const std::size_t es = dtype_size(out.dtype), ce = chunk_elems(config, es);
  char* o = static_cast<char*>(out.ptr);
  Transfers sends, recvs;
  if (position > 0)
    for (std::size_t off = 0; off < out.count; off += ce)
      recvs.push_back(t.irecv(left, o + off * es, std::min(ce, out.count - off) * es));
  std::size_t k = 0;
  for (std::size_t off = 0; off < out.count; off += ce) {
    const std::size_t len = std::min(ce, out.count - off);
    if (position > 0) t.wait(*recvs[k++], left, deadline);
    if (position < n - 1) sends.push_back(t.isend(right, o + off * es, len * es));
  }
  wait_all(t, sends, right, deadline);
}

void ring_barrier(RingTransport& t, const Deadline& deadline, RingScratch& scratch) {
  // An all-reduce with one element per rank: every segment carries a message,
  // so no rank leaves before every rank has entered.
  const std::size_t n = static_cast<std::size_t>(t.size());
  std::vector<std::int32_t> token(n, 1);
  const BufferView v{token.data(), n, DType::i32, Device::cpu()};
  ring_allreduce(t, v, v, ReduceOp::sum, RingConfig{}, deadline, scratch);
}

}  // namespace ringtrain::comm_detail
