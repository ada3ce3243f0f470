// Fused causal attention: the GPU's kernels, or on the CPU the same tiled
// algorithm written as loops over the same tile arithmetic
// (kernels/flash_attention.cuh). The CPU loops mirror the kernels' work split
// (a query tile's rows against key tiles in the forward; per key, the query
// rows in order for dK and dV; per query, the keys in order for dQ), so each
// sum runs in the kernels' order. The CPU layer keeps its plain unfused path;
// this is the reference that checks the fused arithmetic without a GPU.
#include "ringtrain/ops/fused_attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/flash_attention.cuh"
#include "ops/gpu_fused_attention.h"
#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

struct HeadView {
  std::size_t c3, d;
  float scale, keep_scale;
};

HeadView head_view(const FusedAttentionShape& s) {
  const std::size_t d = s.c / s.heads;
  return {3 * s.c, d, 1.0f / std::sqrt(static_cast<float>(d)), 1.0f / (1.0f - s.dropout)};
}

void check_shape(const FusedAttentionShape& s, const std::string& layer) {
  RT_CHECK(s.heads >= 1 && s.c % s.heads == 0, "layer '{}': width {} is not a multiple of {} heads",
           layer, s.c, s.heads);
  RT_CHECK(s.c / s.heads <= static_cast<std::size_t>(kernels::kFlashMaxHeadDim),
           "layer '{}': fused attention holds heads up to {} wide, not {} (select the unfused "
           "path: RINGTRAIN_ATTENTION=unfused)",
           layer, kernels::kFlashMaxHeadDim, s.c / s.heads);
  RT_CHECK(s.dropout >= 0.0f && s.dropout < 1.0f,
           "layer '{}': attention dropout {} is outside [0, 1)", layer, s.dropout);
}

}  // namespace

void fused_attention_forward(const ComputeContext& ctx, const FusedAttentionShape& s,
                             const float* qkv, float* o, float* lse, const std::string& layer,
                             AttentionTiles tiles) {
  check_shape(s, layer);
  if (ctx.is_cuda()) return detail::gpu_fused_attention_forward(ctx.stream(), s, qkv, o, lse);
  const HeadView hv = head_view(s);
  const int t = static_cast<int>(s.t), d = static_cast<int>(hv.d);
  const int br = static_cast<int>(tiles.rows), bc = static_cast<int>(tiles.cols);
  std::vector<float> acc(tiles.rows * hv.d), score(tiles.cols), z(tiles.cols);
  std::vector<kernels::FlashRowState> state(tiles.rows);
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t h = 0; h < s.heads; ++h) {
      const std::uint64_t key = kernels::attention_head_key(s.node_key, h);
      const float* base = qkv + b * s.t * hv.c3 + h * hv.d;
      for (int q0 = 0; q0 < t; q0 += br) {
        const int rows = std::min(br, t - q0);
        std::fill(acc.begin(), acc.end(), 0.0f);
        std::fill(state.begin(), state.end(), kernels::flash_row_start());
        for (int k0 = 0; k0 < q0 + rows; k0 += bc) {
          const int n = std::min(bc, t - k0);
          for (int r = 0; r < rows; ++r) {
            const int i = q0 + r;
            const float* q = base + static_cast<std::size_t>(i) * hv.c3;
            for (int j = 0; j < n; ++j) {
              const int kj = k0 + j;
              score[j] = kj <= i ? hv.scale * kernels::flash_dot(q, base + kj * hv.c3 + s.c, d)
                                 : -INFINITY;
              z[j] = kernels::attention_dropout_factor(key, b, t, i, kj, s.dropout, hv.keep_scale);
            }
            kernels::flash_forward_row_tile(state[r], acc.data() + r * hv.d, d, score.data(),
                                            z.data(), n, base + k0 * hv.c3 + 2 * s.c,
                                            static_cast<int>(hv.c3));
          }
        }
        for (int r = 0; r < rows; ++r) {
          const std::size_t i = static_cast<std::size_t>(q0 + r);
          kernels::flash_forward_row_finish(state[r], acc.data() + r * hv.d, d,
                                            o + (b * s.t + i) * s.c + h * hv.d,
                                            lse + (b * s.heads + h) * s.t + i);
        }
      }
    }
}

void fused_attention_backward(const ComputeContext& ctx, const FusedAttentionShape& s,
                              const float* qkv, const float* o, const float* d_o, const float* lse,
                              float* delta, float* d_qkv, AttentionTiles tiles) {
  check_shape(s, "fused attention");
  if (ctx.is_cuda())
    return detail::gpu_fused_attention_backward(ctx.stream(), s, qkv, o, d_o, lse, delta, d_qkv);
  const HeadView hv = head_view(s);
  const int t = static_cast<int>(s.t), d = static_cast<int>(hv.d);
  const int br = static_cast<int>(tiles.rows), bc = static_cast<int>(tiles.cols);
  std::vector<float> score(tiles.cols), z(tiles.cols), dpd(tiles.cols), p_dropped(tiles.cols),
      ds(tiles.cols);
  for (std::size_t b = 0; b < s.batch; ++b)
    for (std::size_t h = 0; h < s.heads; ++h) {
      const std::uint64_t key = kernels::attention_head_key(s.node_key, h);
      const float* base = qkv + b * s.t * hv.c3 + h * hv.d;
      const float* ob = o + b * s.t * s.c + h * hv.d;
      const float* dob = d_o + b * s.t * s.c + h * hv.d;
      const float* l = lse + (b * s.heads + h) * s.t;
      float* dl = delta + (b * s.heads + h) * s.t;
      float* dbase = d_qkv + b * s.t * hv.c3 + h * hv.d;
      for (int i = 0; i < t; ++i) dl[i] = kernels::flash_row_delta(dob + i * s.c, ob + i * s.c, d);
      // dK, dV: per key j (a GPU thread each), the query rows i >= j in order,
      // tile after tile.
      for (int k0 = 0; k0 < t; k0 += bc)
        for (int j = k0; j < std::min(t, k0 + bc); ++j) {
          const float* kj = base + j * hv.c3 + s.c;
          const float* vj = kj + s.c;
          float* dk = dbase + j * hv.c3 + s.c;
          float* dv = dk + s.c;
          std::fill_n(dk, d, 0.0f);
          std::fill_n(dv, d, 0.0f);
          for (int q0 = (k0 / br) * br; q0 < t; q0 += br)
            for (int i = std::max(q0, j); i < std::min(t, q0 + br); ++i) {
              const float* qi = base + i * hv.c3;
              const float* doi = dob + i * s.c;
              float pz = 0.0f, dsij = 0.0f;
              kernels::flash_backward_element(
                  hv.scale * kernels::flash_dot(qi, kj, d), l[i], dl[i],
                  kernels::attention_dropout_factor(key, b, t, i, j, s.dropout, hv.keep_scale),
                  kernels::flash_dot(doi, vj, d), hv.scale, &pz, &dsij);
              for (int c = 0; c < d; ++c) {
                dv[c] += pz * doi[c];
                dk[c] += dsij * qi[c];
              }
            }
        }
      // dQ: per query row i (a GPU thread each), the key tiles in order.
      for (int i = 0; i < t; ++i) {
        const float* qi = base + i * hv.c3;
        const float* doi = dob + i * s.c;
        float* dq = dbase + i * hv.c3;
        std::fill_n(dq, d, 0.0f);
        for (int k0 = 0; k0 <= i; k0 += bc) {
          const int n = std::min(bc, t - k0);
          for (int j = 0; j < n && k0 + j <= i; ++j) {
            const float* kj = base + (k0 + j) * hv.c3 + s.c;
            score[j] = hv.scale * kernels::flash_dot(qi, kj, d);
            dpd[j] = kernels::flash_dot(doi, kj + s.c, d);
            z[j] =
                kernels::attention_dropout_factor(key, b, t, i, k0 + j, s.dropout, hv.keep_scale);
          }
          kernels::flash_backward_row_tile(score.data(), z.data(), dpd.data(), n, i - k0, l[i],
                                           dl[i], hv.scale, p_dropped.data(), ds.data());
          for (int j = 0; j < n && k0 + j <= i; ++j) {
            const float* kj = base + (k0 + j) * hv.c3 + s.c;
            for (int c = 0; c < d; ++c) dq[c] += ds[j] * kj[c];
          }
        }
      }
    }
}

}  // namespace ringtrain
