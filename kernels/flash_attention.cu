// Fused causal attention kernels (launchers in kernels/flash_attention.h),
// flash-attention style in fp32, the tile arithmetic from
// kernels/flash_attention.cuh. One thread owns one query row (forward, dQ) or
// one key (dK, dV) and keeps its row in registers; the other operand's tile
// sits in shared memory. Each sum runs in key (or query) order inside one
// thread, so results repeat bit for bit and no float atomics are needed:
//   forward  block = 64 query rows; key tiles of 32 in order, online softmax;
//   delta    D = dO . O per row;
//   dK, dV   block = 64 keys; query tiles of 32 from the key tile on;
//   dQ       block = 64 query rows; key tiles of 32 up to the diagonal.
// Written for correctness and memory (no T x T buffer), not yet tuned: no
// tensor cores, a head of up to kFlashMaxHeadDim floats per thread.
#include <math.h>

#include "core/cuda/check_cuda.h"
#include "kernels/flash_attention.cuh"
#include "kernels/flash_attention.h"

namespace ringtrain::kernels {

namespace {

constexpr int kD = kFlashMaxHeadDim;
constexpr int kRowsPerBlock = 64;  // threads: query rows or keys
constexpr int kTile = 32;          // the shared operand's rows per tile

struct Dims {
  int t, c, heads, d;
  std::size_t c3;
  float scale, dropout, keep_scale;
  uint64_t node_key;
};

Dims dims_of(const FlashAttentionArgs& a) {
  const int d = static_cast<int>(a.c / a.heads);
  return {static_cast<int>(a.t),
          static_cast<int>(a.c),
          static_cast<int>(a.heads),
          d,
          3 * a.c,
          1.0f / sqrtf(static_cast<float>(d)),
          a.dropout,
          1.0f / (1.0f - a.dropout),
          a.node_key};
}

// Rows [r0, r0 + n) of one head's slice at column `col` of rows `stride`
// apart, into tile[n][d].
__device__ void load_tile(float* tile, const float* base, int r0, int n, int d, std::size_t stride,
                          int col) {
  for (int e = threadIdx.x; e < n * d; e += blockDim.x) {
    const int r = e / d, c = e % d;
    tile[e] = base[static_cast<std::size_t>(r0 + r) * stride + col + c];
  }
}

__global__ void __launch_bounds__(kRowsPerBlock)
    flash_forward_kernel(const float* qkv, float* o, float* lse, Dims m) {
  __shared__ float ks[kTile * kD];
  __shared__ float vs[kTile * kD];
  const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * kRowsPerBlock;
  const int i = q0 + static_cast<int>(threadIdx.x);
  const bool row = i < m.t;
  const float* base =
      qkv + static_cast<std::size_t>(b) * m.t * m.c3 + static_cast<std::size_t>(h) * m.d;
  const uint64_t key = attention_head_key(m.node_key, h);
  float q[kD], acc[kD], s[kTile], z[kTile];
  for (int c = 0; c < m.d; ++c) {
    q[c] = row ? base[static_cast<std::size_t>(i) * m.c3 + c] : 0.0f;
    acc[c] = 0.0f;
  }
  FlashRowState st = flash_row_start();
  const int last = min(m.t, q0 + kRowsPerBlock) - 1;
  for (int k0 = 0; k0 <= last; k0 += kTile) {
    const int n = min(kTile, m.t - k0);
    __syncthreads();  // the previous tile is consumed
    load_tile(ks, base, k0, n, m.d, m.c3, m.c);
    load_tile(vs, base, k0, n, m.d, m.c3, 2 * m.c);
    __syncthreads();
    if (!row) continue;
    for (int j = 0; j < n; ++j) {
      const int kj = k0 + j;
      s[j] = kj <= i ? m.scale * flash_dot(q, ks + j * m.d, m.d) : -INFINITY;
      z[j] = attention_dropout_factor(key, b, m.t, i, kj, m.dropout, m.keep_scale);
    }
    flash_forward_row_tile(st, acc, m.d, s, z, n, vs, m.d);
  }
  if (row)
    flash_forward_row_finish(
        st, acc, m.d,
        o + (static_cast<std::size_t>(b) * m.t + i) * m.c + static_cast<std::size_t>(h) * m.d,
        lse + (static_cast<std::size_t>(b) * m.heads + h) * m.t + i);
}

__global__ void flash_delta_kernel(const float* o, const float* d_o, float* delta, Dims m,
                                   std::size_t rows) {
  const std::size_t r = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  // r = (b * heads + h) * t + i
  const std::size_t i = r % m.t, bh = r / m.t, h = bh % m.heads, b = bh / m.heads;
  const std::size_t at = (b * m.t + i) * m.c + h * m.d;
  delta[r] = flash_row_delta(d_o + at, o + at, m.d);
}

__global__ void __launch_bounds__(kRowsPerBlock)
    flash_dkdv_kernel(const float* qkv, const float* d_o, const float* lse, const float* delta,
                      float* d_qkv, Dims m) {
  __shared__ float qs[kTile * kD];
  __shared__ float dos[kTile * kD];
  __shared__ float ls[kTile], deltas[kTile];
  const int b = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * kRowsPerBlock;
  const int j = k0 + static_cast<int>(threadIdx.x);
  const bool col = j < m.t;
  const std::size_t hd = static_cast<std::size_t>(h) * m.d;
  const float* base = qkv + static_cast<std::size_t>(b) * m.t * m.c3 + hd;
  const float* dob = d_o + static_cast<std::size_t>(b) * m.t * m.c + hd;
  const float* lb = lse + (static_cast<std::size_t>(b) * m.heads + h) * m.t;
  const float* db = delta + (static_cast<std::size_t>(b) * m.heads + h) * m.t;
  const uint64_t key = attention_head_key(m.node_key, h);
  float k[kD], v[kD], dk[kD], dv[kD];
  for (int c = 0; c < m.d; ++c) {
    k[c] = col ? base[static_cast<std::size_t>(j) * m.c3 + m.c + c] : 0.0f;
    v[c] = col ? base[static_cast<std::size_t>(j) * m.c3 + 2 * m.c + c] : 0.0f;
    dk[c] = 0.0f;
    dv[c] = 0.0f;
  }
  for (int q0 = k0; q0 < m.t; q0 += kTile) {
    const int n = min(kTile, m.t - q0);
    __syncthreads();
    load_tile(qs, base, q0, n, m.d, m.c3, 0);
    load_tile(dos, dob, q0, n, m.d, static_cast<std::size_t>(m.c), 0);
    for (int r = threadIdx.x; r < n; r += blockDim.x) {
      ls[r] = lb[q0 + r];
      deltas[r] = db[q0 + r];
    }
    __syncthreads();
    if (!col) continue;
    for (int r = 0; r < n; ++r) {
      const int i = q0 + r;
      if (i < j) continue;
      const float* qi = qs + r * m.d;
      const float* doi = dos + r * m.d;
      float pz, dsij;
      flash_backward_element(m.scale * flash_dot(qi, k, m.d), ls[r], deltas[r],
                             attention_dropout_factor(key, b, m.t, i, j, m.dropout, m.keep_scale),
                             flash_dot(doi, v, m.d), m.scale, &pz, &dsij);
      for (int c = 0; c < m.d; ++c) {
        dv[c] += pz * doi[c];
        dk[c] += dsij * qi[c];
      }
    }
  }
  if (!col) return;
  float* out =
      d_qkv + static_cast<std::size_t>(b) * m.t * m.c3 + hd + static_cast<std::size_t>(j) * m.c3;
  for (int c = 0; c < m.d; ++c) {
    out[m.c + c] = dk[c];
    out[2 * m.c + c] = dv[c];
  }
}

__global__ void __launch_bounds__(kRowsPerBlock)
    flash_dq_kernel(const float* qkv, const float* d_o, const float* lse, const float* delta,
                    float* d_qkv, Dims m) {
  __shared__ float ks[kTile * kD];
  __shared__ float vs[kTile * kD];
  const int b = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * kRowsPerBlock;
  const int i = q0 + static_cast<int>(threadIdx.x);
  const bool row = i < m.t;
  const std::size_t hd = static_cast<std::size_t>(h) * m.d;
  const float* base = qkv + static_cast<std::size_t>(b) * m.t * m.c3 + hd;
  const float* doi_g = d_o + (static_cast<std::size_t>(b) * m.t + (row ? i : 0)) * m.c + hd;
  const std::size_t lrow = (static_cast<std::size_t>(b) * m.heads + h) * m.t + (row ? i : 0);
  const float l = row ? lse[lrow] : 0.0f, dl = row ? delta[lrow] : 0.0f;
  const uint64_t key = attention_head_key(m.node_key, h);
  float q[kD], doi[kD], dq[kD], s[kTile], z[kTile], dpd[kTile], pz[kTile], ds[kTile];
  for (int c = 0; c < m.d; ++c) {
    q[c] = row ? base[static_cast<std::size_t>(i) * m.c3 + c] : 0.0f;
    doi[c] = row ? doi_g[c] : 0.0f;
    dq[c] = 0.0f;
  }
  const int last = min(m.t, q0 + kRowsPerBlock) - 1;
  for (int k0 = 0; k0 <= last; k0 += kTile) {
    const int n = min(kTile, m.t - k0);
    __syncthreads();
    load_tile(ks, base, k0, n, m.d, m.c3, m.c);
    load_tile(vs, base, k0, n, m.d, m.c3, 2 * m.c);
    __syncthreads();
    if (!row || k0 > i) continue;
    for (int j = 0; j < n && k0 + j <= i; ++j) {
      s[j] = m.scale * flash_dot(q, ks + j * m.d, m.d);
      dpd[j] = flash_dot(doi, vs + j * m.d, m.d);
      z[j] = attention_dropout_factor(key, b, m.t, i, k0 + j, m.dropout, m.keep_scale);
    }
    flash_backward_row_tile(s, z, dpd, n, i - k0, l, dl, m.scale, pz, ds);
    for (int j = 0; j < n && k0 + j <= i; ++j)
      for (int c = 0; c < m.d; ++c) dq[c] += ds[j] * ks[j * m.d + c];
  }
  if (!row) return;
  float* out =
      d_qkv + static_cast<std::size_t>(b) * m.t * m.c3 + hd + static_cast<std::size_t>(i) * m.c3;
  for (int c = 0; c < m.d; ++c) out[c] = dq[c];
}

dim3 grid_of(const FlashAttentionArgs& a) {
  return dim3(static_cast<unsigned>((a.t + kRowsPerBlock - 1) / kRowsPerBlock),
              static_cast<unsigned>(a.heads), static_cast<unsigned>(a.batch));
}

}  // namespace

void flash_attention_forward_cuda(const FlashAttentionArgs& a, const float* qkv, float* o,
                                  float* lse, void* stream) {
  if (a.batch == 0 || a.t == 0) return;
  flash_forward_kernel<<<grid_of(a), kRowsPerBlock, 0, static_cast<cudaStream_t>(stream)>>>(
      qkv, o, lse, dims_of(a));
  RT_CUDA_CHECK_LAUNCH();
}

void flash_attention_backward_cuda(const FlashAttentionArgs& a, const float* qkv, const float* o,
                                   const float* d_o, const float* lse, float* delta, float* d_qkv,
                                   void* stream) {
  if (a.batch == 0 || a.t == 0) return;
  const Dims m = dims_of(a);
  const auto s = static_cast<cudaStream_t>(stream);
  const std::size_t rows = a.batch * a.heads * a.t;
  constexpr unsigned kDeltaThreads = 256;
  flash_delta_kernel<<<static_cast<unsigned>((rows + kDeltaThreads - 1) / kDeltaThreads),
                       kDeltaThreads, 0, s>>>(o, d_o, delta, m, rows);
  RT_CUDA_CHECK_LAUNCH();
  flash_dkdv_kernel<<<grid_of(a), kRowsPerBlock, 0, s>>>(qkv, d_o, lse, delta, d_qkv, m);
  RT_CUDA_CHECK_LAUNCH();
  flash_dq_kernel<<<grid_of(a), kRowsPerBlock, 0, s>>>(qkv, d_o, lse, delta, d_qkv, m);
  RT_CUDA_CHECK_LAUNCH();
}

}  // namespace ringtrain::kernels
