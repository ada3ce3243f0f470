// The tile arithmetic of fused (flash-attention style) causal attention, one
// query row at a time: the forward's online softmax over tiles of keys (a
// running max m, sum l and accumulator of P V, never the whole T x T matrix)
// and the backward's per-element step dS = P o (dP - D), P recomputed from the
// score and the row's log-sum-exp L. The CUDA kernels (kernels/
// flash_attention.cu) and the CPU's emulation of the same tiled algorithm
// (src/ops/flash_attention.cpp) both call these, so CPU tests check the
// arithmetic the GPU runs.
//
// Attention dropout multiplies the normalised P by z = 0 or 1/(1-p), z from
// kernels/dropout.cuh keyed per head (attention_head_key) and indexed by the
// element's place in the unfused path's [batch, T, T] matrix of that head, so
// fused and unfused paths drop the very same elements. The softmax sum l counts
// every element (dropout acts after normalisation); only the accumulator sees z.
#pragma once

#include <math.h>
#include <stdint.h>

#include "kernels/dropout.cuh"
#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

// The widest head the fused kernels hold in registers.
constexpr int kFlashMaxHeadDim = 128;

// One mask per head: the node's dropout key mixed with the head.
RT_HD uint64_t attention_head_key(uint64_t node_key, uint64_t head) {
  return mix64(node_key ^ (head + 1));
}

// The dropout factor of element (i, j) of sample b's T x T matrix of a head:
// 1 without dropout.
RT_HD float attention_dropout_factor(uint64_t head_key, uint64_t b, int t, int i, int j, float p,
                                     float keep_scale) {
  if (p <= 0.0f) return 1.0f;
  const uint64_t tt = static_cast<uint64_t>(t) * static_cast<uint64_t>(t);
  return dropout_factor(head_key, b * tt + static_cast<uint64_t>(i) * t + j, p, keep_scale);
}

// A query row's running state over the key tiles seen so far.
struct FlashRowState {
  float m;  // the largest score
  float l;  // sum of exp(s - m)
};

RT_HD FlashRowState flash_row_start() {
  return {-INFINITY, 0.0f};
}

// Folds one tile of n keys into a row: s[j] the scaled scores (-INFINITY
// where causally masked), z[j] the dropout factors, v row j of the tile's
// values at v + j * v_stride. acc (d floats) holds sum_j exp(s_j - m) z_j v_j.
// The first tile of a row holds key 0, so m is finite after it.
RT_HD void flash_forward_row_tile(FlashRowState& st, float* acc, int d, const float* s,
                                  const float* z, int n, const float* v, int v_stride) {
  float tile_max = -INFINITY;
  for (int j = 0; j < n; ++j) tile_max = s[j] > tile_max ? s[j] : tile_max;
  if (tile_max == -INFINITY) return;  // every key of the tile is in the future
  const float m_new = tile_max > st.m ? tile_max : st.m;
  const float correction = expf(st.m - m_new);  // 0 on the first tile
  st.l *= correction;
  for (int c = 0; c < d; ++c) acc[c] *= correction;
  for (int j = 0; j < n; ++j) {
    const float e = expf(s[j] - m_new);  // 0 where masked
    st.l += e;
    const float ez = e * z[j];
    if (ez != 0.0f)
      for (int c = 0; c < d; ++c) acc[c] += ez * v[j * v_stride + c];
  }
  st.m = m_new;
}

// The row's output O = acc / l and its log-sum-exp L = m + log l (for the
// backward's P = exp(s - L)).
RT_HD void flash_forward_row_finish(const FlashRowState& st, const float* acc, int d, float* o,
                                    float* lse) {
  const float inv = 1.0f / st.l;
  for (int c = 0; c < d; ++c) o[c] = acc[c] * inv;
  *lse = st.m + logf(st.l);
}

// D = dO . O of a row: sum_j P_ij dP_ij, with dropout too (O = (P o Z) V).
RT_HD float flash_row_delta(const float* d_o, const float* o, int d) {
  float sum = 0.0f;
  for (int c = 0; c < d; ++c) sum += d_o[c] * o[c];
  return sum;
}

// One element of the backward: from the scaled score s, the row's L and D,
// the dropout factor z and dPd = dO_i . V_j, the dropped probability P z (for
// dV = (P o Z)^T dO) and dS = scale P (z dPd - D) (for dQ = dS K, dK = dS^T Q).
RT_HD void flash_backward_element(float s, float lse, float delta, float z, float dpd, float scale,
                                  float* p_dropped, float* ds) {
  const float p = expf(s - lse);
  *p_dropped = p * z;
  *ds = scale * p * (z * dpd - delta);
}

// The element step over one row's tile of n keys (j > last causally masked).
RT_HD void flash_backward_row_tile(const float* s, const float* z, const float* dpd, int n,
                                   int last, float lse, float delta, float scale, float* p_dropped,
                                   float* ds) {
  for (int j = 0; j < n; ++j) {
    if (j > last) {
      p_dropped[j] = 0.0f;
      ds[j] = 0.0f;
    } else {
      flash_backward_element(s[j], lse, delta, z[j], dpd[j], scale, p_dropped + j, ds + j);
    }
  }
}

RT_HD float flash_dot(const float* a, const float* b, int d) {
  float sum = 0.0f;
  for (int c = 0; c < d; ++c) sum += a[c] * b[c];
  return sum;
}

}  // namespace ringtrain::kernels
