// Mixup and CutMix: the batch steps of --augment, as torchvision.transforms.v2
// MixUp and CutMix define them, applied after the per-sample steps to the
// whole batch of a rank.
//
//   mixup(alpha=A)   lam ~ Beta(A, A); x = lam x + (1 - lam) x[perm]
//   cutmix(alpha=A)  lam ~ Beta(A, A); a box of area (1 - lam) H W at a
//                    uniform centre, clipped to the image, is copied from
//                    x[perm]; lam = 1 - (clipped box area) / (H W)
//
// and the loss is lam CE(y) + (1 - lam) CE(y[perm]) (ops/softmax_cross_entropy.h's
// LabelMix). Given both, each batch takes one of them with probability 0.5
// (torchvision's RandomChoice). The permutation pairs rows of the rank's own
// batch. Every draw (the choice, lam, the permutation, the box centre) is a
// pure function of (seed, step, rank): a run repeats bit for bit, and a
// resumed run mixes as the uninterrupted one. Unlike the per-sample steps,
// the mix depends on how the global batch is split over ranks (1 rank x 4B
// pairs samples across all 4B, 2 ranks x 2B within each half).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/core/buffer_view.h"

namespace ringtrain {

// The batch steps of an --augment spec (SampleTransform::batch_mix_of).
struct BatchMixSpec {
  double mixup_alpha = 0;   // > 0: mixup(alpha) is given
  double cutmix_alpha = 0;  // > 0: cutmix(alpha) is given
  bool any() const { return mixup_alpha > 0 || cutmix_alpha > 0; }
  // "mixup(alpha=0.2), cutmix(alpha=1)", or "" without batch steps.
  std::string describe() const;
};

// One batch's draw.
struct BatchMixDraw {
  enum class Kind { mixup, cutmix } kind = Kind::mixup;
  float lam = 1.0f;       // the weight of each row's own sample and label
  std::uint64_t key = 0;  // of the permutation (partner())
  // cutmix: rows [y0, y1) and columns [x0, x1) of every plane come from the partner.
  std::size_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
};

// torchvision's CutMix box: half sides r W and r H with r = sqrt(1 - lam) / 2
// (truncated to integers) about the centre (cy, cx), clipped to the H x W
// image, and the lam its clipped area leaves.
struct CutmixBox {
  std::size_t y0 = 0, y1 = 0, x0 = 0, x1 = 0;
  double lam = 1.0;
};
CutmixBox cutmix_box(double lam, std::size_t cy, std::size_t cx, std::size_t h, std::size_t w);

class BatchMixer {
 public:
  // sample_shape: per sample, as the model reads it. cutmix needs images
  // ([C, H, W]); mixup takes any float sample. Errors name `flag`.
  BatchMixer(const BatchMixSpec& spec, std::uint64_t seed, std::vector<std::size_t> sample_shape,
             const std::string& flag = "--augment");

  const BatchMixSpec& spec() const { return spec_; }
  std::size_t sample_elements() const { return sample_elements_; }

  // The draw of one batch: the step (the micro-batch's index in the run) and
  // the rank.
  BatchMixDraw draw(std::uint64_t step, std::uint64_t rank) const;

  // Mixes a batch of `rows` samples: out_x = the mixed samples, out_second =
  // each row's partner's label (the loss's second label). x and labels (one
  // int32 per row) are read, never written; all four views are on one device,
  // and on a GPU the work is queued on `stream` (a cudaStream_t; the model's
  // compute stream, so it is ordered before the forward that reads it).
  void apply(const BatchMixDraw& draw, BufferView x, BufferView labels, std::size_t rows,
             BufferView out_x, BufferView out_second, void* stream = nullptr) const;

  // The row whose sample and label are mixed into `row` of a batch of `rows`
  // (a permutation of [0, rows) for each draw).
  static std::size_t partner(const BatchMixDraw& draw, std::size_t row, std::size_t rows);

 private:
  BatchMixSpec spec_;
  std::uint64_t seed_;
  std::vector<std::size_t> shape_;
  std::size_t sample_elements_ = 0;
};

}  // namespace ringtrain
