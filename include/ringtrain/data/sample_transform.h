// The augmentation language of --augment and --eval-transform: a list of
// steps applied to each stored image (uint8, C x H x W) on the loader
// threads, ending in float32 for the model.
//
//   random_resized_crop(224, scale=(0.08,1), ratio=(3/4,4/3))
//   random_crop(32, padding=4)      hflip(p=0.5)
//   resize(256)  (short side)       resize(240,320)  (H,W)
//   center_crop(224)                normalize(mean=(0.485,0.456,0.406), std=(0.229,0.224,0.225))
//   presets: imagenet, cifar        none
//
// Steps are separated by commas (or '+'); a size is N or (H,W). Geometry
// follows torchvision's transforms on PIL images step by step (the same
// parameter draws, crop offsets, resize arithmetic), but the random numbers
// are ringtrain's own: every choice for a sample comes from a stream seeded by
// (seed, epoch, sample index), never from a thread's or rank's state, so a
// sample is augmented the same way at any world size, any number of loader
// threads, and after a resume.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ringtrain/data/batch_mix.h"

namespace ringtrain {

class SampleTransform {
 public:
  // Throws Error naming `flag` and the bad text. The batch steps (mixup,
  // cutmix: batch_mix.h) are taken under --augment only, last in the list;
  // they are not part of the transform's per-sample work but kept in
  // batch_mix() for the trainer.
  static std::shared_ptr<const SampleTransform> parse(const std::string& spec, std::uint64_t seed,
                                                      const std::string& flag = "--augment");
  // The batch steps of a training spec (none: BatchMixSpec::any() is false).
  static BatchMixSpec batch_mix_of(const std::string& spec, const std::string& flag = "--augment");
  // The evaluation counterpart of a training spec: random_resized_crop(S)
  // becomes resize(S*256/224) + center_crop(S), random_crop(S) center_crop(S),
  // hflip is dropped; the rest is kept; mixup and cutmix are dropped. The
  // presets' eval forms are torchvision's (imagenet: resize 256, center crop
  // 224, same normalisation).
  static std::string eval_spec_of(const std::string& train_spec);

  // The output shape for stored samples of `stored` (C, H, W); throws Error
  // when a step does not fit (a crop larger than its input, normalize with the
  // wrong number of channels).
  std::vector<std::size_t> output_shape(const std::vector<std::size_t>& stored) const;

  // One stored sample (C, H, W bytes) to the model's floats, in the output
  // shape. Without normalize the bytes map through the dataset's scale and
  // offset. Thread-safe: any thread may transform any sample.
  void apply(const std::uint8_t* stored, const std::vector<std::size_t>& stored_shape, float scale,
             float offset, std::uint64_t epoch, std::uint64_t index, float* out) const;

  // The same sample as bytes (the geometry only, in the output shape), and
  // the per-channel widening that makes apply()'s floats of them: out[c][i] =
  // byte * channel_scales[c] + channel_offsets[c] (kernels::normalize_byte).
  // A GPU rank's loader ships the bytes and widens on the device.
  void apply_bytes(const std::uint8_t* stored, const std::vector<std::size_t>& stored_shape,
                   std::uint64_t epoch, std::uint64_t index, std::uint8_t* out) const;
  void widening(std::size_t channels, float scale, float offset, std::vector<float>& channel_scales,
                std::vector<float>& channel_offsets) const;

  const std::string& spec() const { return spec_; }
  // The steps as parsed, with every default written out.
  std::string describe() const;
  bool random() const;  // whether any step draws random numbers
  // Whether there is no per-sample step (none, or batch steps only): the
  // samples reach the model as stored.
  bool per_sample_empty() const { return steps_.empty(); }
  const BatchMixSpec& batch_mix() const { return batch_mix_; }

  struct Step;  // src/data/sample_transform.cpp
  SampleTransform(std::string spec, std::uint64_t seed, std::vector<Step> steps);
  ~SampleTransform();

 private:
  // Runs the geometric steps of one sample; emit(planes, normalize step or null).
  template <typename Emit>
  void run(const std::uint8_t* stored, const std::vector<std::size_t>& shape, std::uint64_t epoch,
           std::uint64_t index, Emit&& emit) const;
  std::string spec_;
  std::uint64_t seed_;
  std::vector<Step> steps_;
  BatchMixSpec batch_mix_;
};

}  // namespace ringtrain
