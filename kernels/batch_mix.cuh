// Mixup and CutMix on a batch (--augment mixup / cutmix), element by element:
// the CPU loop (src/data/batch_mix.cpp) and the kernel (kernels/batch_mix.cu)
// call the same functions, so a GPU rank mixes the floats a CPU rank mixes.
//
// Row i of the batch is mixed with row partner(i), a permutation of the
// rank's rows drawn per batch (torchvision.transforms.v2 pairs row i with row
// i - 1, relying on the loader's shuffle; ringtrain's sampler shuffles too,
// and a keyed permutation also varies the pairs when the same samples meet
// again). The permutation is a keyed Feistel network on the next power of
// four above the row count, walked until it lands inside (cycle walking): a
// bijection computed per row from (key, row) alone, so the device needs no
// table uploaded from the host.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/host_device.cuh"

namespace ringtrain::kernels {

inline constexpr int kMixNone = 0, kMixup = 1, kCutmix = 2;

// One batch's mix, drawn on the host (data/batch_mix.h) from (seed, step, rank).
struct BatchMix {
  int kind = kMixNone;
  float lam = 1.0f;        // the weight of the row's own sample and label
  std::uint64_t key = 0;   // of the partner permutation
  std::uint32_t rows = 0;  // the batch's rows (samples)
  std::size_t sample = 0;  // floats per sample
  // cutmix: the samples' planes are h x w; rows [y0, y1) and columns
  // [x0, x1) of every plane come from the partner.
  std::uint32_t h = 0, w = 0, y0 = 0, y1 = 0, x0 = 0, x1 = 0;
};

RT_HD std::uint64_t mix_hash(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The row mixed into `row` of a batch of `rows`: a bijection of [0, rows).
RT_HD std::uint32_t mix_partner(std::uint32_t row, std::uint32_t rows, std::uint64_t key) {
  if (rows <= 1) return row;
  int half = 1;  // bits per Feistel half: 4^half >= rows
  while ((std::uint64_t{1} << (2 * half)) < rows) ++half;
  const std::uint32_t mask = (std::uint32_t{1} << half) - 1;
  std::uint32_t x = row;
  do {
    std::uint32_t l = x >> half, r = x & mask;
    for (std::uint64_t round = 0; round < 4; ++round) {
      const std::uint32_t f =
          static_cast<std::uint32_t>(mix_hash(key ^ (round * 0x9E3779B97F4A7C15ull) ^ r)) & mask;
      const std::uint32_t t = l ^ f;
      l = r;
      r = t;
    }
    x = (l << half) | r;
  } while (x >= rows);  // outside [0, rows): walk on (ends: x's cycle holds `row`)
  return x;
}

// lam a + (1 - lam) b, the product rounded before the sum on both sides (the
// CPU source is compiled without contraction; the device must not fuse it).
RT_HD float mix_blend(float a, float b, float lam) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(__fmul_rn(lam, a), __fmul_rn(1.0f - lam, b));
#else
  return lam * a + (1.0f - lam) * b;
#endif
}

// Whether element e of a sample lies in cutmix's box (any channel's plane).
RT_HD bool cutmix_in_box(std::size_t e, const BatchMix& m) {
  const std::size_t plane = static_cast<std::size_t>(m.h) * m.w;
  const std::size_t in_plane = e % plane;
  const std::size_t y = in_plane / m.w, x = in_plane % m.w;
  return y >= m.y0 && y < m.y1 && x >= m.x0 && x < m.x1;
}

// Element i of the mixed batch, from the batch x (rows x sample floats);
// `partner` is mix_partner of i's row.
RT_HD float mixed_element(const float* x, std::size_t i, std::uint32_t partner, const BatchMix& m) {
  const std::size_t e = i % m.sample;
  const float other = x[static_cast<std::size_t>(partner) * m.sample + e];
  if (m.kind == kMixup) return mix_blend(x[i], other, m.lam);
  if (m.kind == kCutmix) return cutmix_in_box(e, m) ? other : x[i];
  return x[i];
}

}  // namespace ringtrain::kernels
