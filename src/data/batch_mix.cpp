// Mixup and CutMix (batch_mix.h): the draws on the host, the mixing by the
// element functions of kernels/batch_mix.cuh, on the CPU here or by the
// kernel on a GPU.
//
// Where the mix happens: on the batch as the trainer receives it, on the
// model's device, after the per-sample steps. Not on the loader's host batch:
// a GPU rank's uint8 images cross as bytes and become floats only on the
// device, and a blend of bytes is not the blend of the floats.
#include "ringtrain/data/batch_mix.h"

#include <algorithm>
#include <cmath>

#include "data/batch_mix_gpu.h"
#include "data/random.h"
#include "kernels/batch_mix.cuh"
#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

// log of a Gamma(a, 1) draw: Marsaglia and Tsang (2000) for a >= 1; below 1,
// Gamma(a) = Gamma(a + 1) U^(1/a), kept in logs so that small alphas (0.2)
// do not underflow to 0 / 0.
double log_gamma_draw(double a, data_random::Xoshiro256& rng) {
  const bool boost = a < 1.0;
  const double d = (boost ? a + 1.0 : a) - 1.0 / 3.0, c = 1.0 / std::sqrt(9.0 * d);
  double v = 0;
  for (;;) {
    double x = 0;
    do {
      x = rng.normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = rng.uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) break;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) break;
  }
  double lg = std::log(d * v);
  if (boost) lg += std::log(1.0 - rng.uniform()) / a;  // U in (0, 1]
  return lg;
}

// Beta(a, a) = X / (X + Y) with X, Y ~ Gamma(a).
double beta_draw(double a, data_random::Xoshiro256& rng) {
  const double lx = log_gamma_draw(a, rng), ly = log_gamma_draw(a, rng);
  return 1.0 / (1.0 + std::exp(ly - lx));
}

kernels::BatchMix kernel_args(const BatchMixDraw& d, std::size_t rows, std::size_t sample,
                              const std::vector<std::size_t>& shape) {
  kernels::BatchMix m;
  m.kind = d.kind == BatchMixDraw::Kind::mixup ? kernels::kMixup : kernels::kCutmix;
  m.lam = d.lam;
  m.key = d.key;
  m.rows = static_cast<std::uint32_t>(rows);
  m.sample = sample;
  if (shape.size() == 3) {
    m.h = static_cast<std::uint32_t>(shape[1]);
    m.w = static_cast<std::uint32_t>(shape[2]);
  }
  m.y0 = static_cast<std::uint32_t>(d.y0);
  m.y1 = static_cast<std::uint32_t>(d.y1);
  m.x0 = static_cast<std::uint32_t>(d.x0);
  m.x1 = static_cast<std::uint32_t>(d.x1);
  return m;
}

}  // namespace

std::string BatchMixSpec::describe() const {
  std::string out;
  if (mixup_alpha > 0) out = fmt::format("mixup(alpha={})", mixup_alpha);
  if (cutmix_alpha > 0)
    out += fmt::format("{}cutmix(alpha={})", out.empty() ? "" : ", ", cutmix_alpha);
  return out;
}

CutmixBox cutmix_box(double lam, std::size_t cy, std::size_t cx, std::size_t h, std::size_t w) {
  const double r = 0.5 * std::sqrt(1.0 - lam);
  const auto half_w = static_cast<std::size_t>(r * static_cast<double>(w));
  const auto half_h = static_cast<std::size_t>(r * static_cast<double>(h));
  CutmixBox b;
  b.x0 = cx > half_w ? cx - half_w : 0;
  b.y0 = cy > half_h ? cy - half_h : 0;
  b.x1 = std::min(cx + half_w, w);
  b.y1 = std::min(cy + half_h, h);
  b.lam = 1.0 - static_cast<double>((b.x1 - b.x0) * (b.y1 - b.y0)) / static_cast<double>(w * h);
  return b;
}

BatchMixer::BatchMixer(const BatchMixSpec& spec, std::uint64_t seed,
                       std::vector<std::size_t> sample_shape, const std::string& flag)
    : spec_(spec), seed_(seed), shape_(std::move(sample_shape)) {
  RT_CHECK(spec_.any(), "internal: a batch mixer without mixup or cutmix");
  sample_elements_ = 1;
  for (std::size_t d : shape_) sample_elements_ *= d;
  RT_CHECK(spec_.cutmix_alpha <= 0 || (shape_.size() == 3 && shape_[1] > 0 && shape_[2] > 0),
           "{} {}: cutmix cuts a box out of images, and the samples here are [{}], not [C, H, W] "
           "(mixup takes any float samples)",
           flag, spec_.describe(), fmt::join(shape_, ", "));
}

BatchMixDraw BatchMixer::draw(std::uint64_t step, std::uint64_t rank) const {
  // One stream per (step, rank) in a family of the seed's own for mixing,
  // apart from the samples' streams (sample_transform.cpp).
  std::uint64_t family = seed_ ^ 0x6D69787570637574ull ^ (0xC2B2AE3D27D4EB4Full * (rank + 1));
  data_random::Xoshiro256 rng(data_random::splitmix64(family), step);
  BatchMixDraw d;
  const bool both = spec_.mixup_alpha > 0 && spec_.cutmix_alpha > 0;
  const bool mixup = both ? rng.uniform() < 0.5 : spec_.mixup_alpha > 0;
  d.kind = mixup ? BatchMixDraw::Kind::mixup : BatchMixDraw::Kind::cutmix;
  double lam = beta_draw(mixup ? spec_.mixup_alpha : spec_.cutmix_alpha, rng);
  d.key = rng.next();
  if (!mixup) {  // torchvision's order: lam, then the centre's column, then its row
    const std::size_t h = shape_[1], w = shape_[2];
    const auto cx = static_cast<std::size_t>(rng.below(w));
    const auto cy = static_cast<std::size_t>(rng.below(h));
    const CutmixBox b = cutmix_box(lam, cy, cx, h, w);
    d.y0 = b.y0;
    d.y1 = b.y1;
    d.x0 = b.x0;
    d.x1 = b.x1;
    lam = b.lam;
  }
  d.lam = static_cast<float>(lam);
  return d;
}

std::size_t BatchMixer::partner(const BatchMixDraw& draw, std::size_t row, std::size_t rows) {
  return kernels::mix_partner(static_cast<std::uint32_t>(row), static_cast<std::uint32_t>(rows),
                              draw.key);
}

void BatchMixer::apply(const BatchMixDraw& draw, BufferView x, BufferView labels, std::size_t rows,
                       BufferView out_x, BufferView out_second, void* stream) const {
  const std::size_t n = rows * sample_elements_;
  RT_CHECK(x.dtype == DType::f32 && out_x.dtype == DType::f32 && labels.dtype == DType::i32 &&
               out_second.dtype == DType::i32,
           "internal: batch mix takes f32 samples and i32 labels");
  RT_CHECK(x.count >= n && out_x.count >= n && labels.count >= rows && out_second.count >= rows,
           "internal: batch mix of {} rows of {} floats into views of {} and {} elements", rows,
           sample_elements_, x.count, out_x.count);
  RT_CHECK(rows <= 0xFFFFFFFFull, "batch mix: {} rows in one batch", rows);
  const kernels::BatchMix m = kernel_args(draw, rows, sample_elements_, shape_);
  if (x.device.is_cuda()) {
    detail::gpu_batch_mix(x.as<const float>(), labels.as<const std::int32_t>(), out_x.as<float>(),
                          out_second.as<std::int32_t>(), m, stream);
    return;
  }
  const float* in = x.as<const float>();
  float* out = out_x.as<float>();
  const std::int32_t* y = labels.as<const std::int32_t>();
  std::int32_t* second = out_second.as<std::int32_t>();
  for (std::size_t r = 0; r < rows; ++r) {
    const std::uint32_t p = kernels::mix_partner(static_cast<std::uint32_t>(r), m.rows, m.key);
    second[r] = y[p];
    for (std::size_t i = r * sample_elements_; i < (r + 1) * sample_elements_; ++i)
      out[i] = kernels::mixed_element(in, i, p, m);
  }
}

}  // namespace ringtrain
