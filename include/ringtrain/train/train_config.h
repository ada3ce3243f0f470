// Everything `ringtrain train` is told, validated in one place so that every
// bad value gets an error naming its flag.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ringtrain/optim/optimizer.h"

namespace ringtrain {

// The seed of a run that names none: `data inspect` defaults to it too, so it
// shows the sharding `train` will use.
inline constexpr std::uint64_t kDefaultSeed = 42;

// --bucket-mb's default, which `model show` uses too.
inline constexpr double kDefaultBucketMb = 1.0;

struct TrainConfig {
  // Model and data.
  std::string data_path;
  std::string split = "train";
  std::string eval_split = "test";
  // False when --eval-split was not given: a file without that split then
  // trains without evaluation (with a note) instead of being refused.
  bool eval_split_required = true;
  bool cache = false;
  std::string model = "cnn";
  std::size_t batch = 64;  // per rank
  // Samples per optimizer step, split over the ranks whatever their number
  // (floor/ceil of G / world per rank and micro-step); 0: --batch per rank.
  std::size_t global_batch = 0;
  std::size_t epochs = 1;
  std::uint64_t max_steps = 0;  // 0: no cap beyond --epochs
  std::uint64_t seed = kDefaultSeed;
  std::size_t prefetch_depth = 2;
  // Image sets: the augmentation of training samples and the transform of
  // evaluation samples (sample_transform.h); "" means none, and an empty
  // eval transform with an augmentation is derived from it.
  std::string augment, eval_transform;
  std::size_t loader_threads = 1;  // decode/augment threads per rank
  std::string tf32 = "default";    // on | off | default (PyTorch's: conv TF32, GEMM fp32); GPU only
  // fp32 | bf16 | fp16 (ringtrain/ops/precision.h). fp16 scales the loss
  // dynamically: from loss_scale_init, doubled after loss_scale_window clean
  // steps, halved on an overflow (whose step is skipped).
  std::string precision = "fp32";
  double loss_scale_init = 65536;
  // auto | nchw | nhwc: the order of [C, H, W] activations
  // (ringtrain/tensor/layout.h; auto is the model's rule).
  std::string layout = "auto";
  // on | off: fused BatchNorm + (add +) ReLU (ModelOptions::fuse).
  std::string fuse = "on";
  // on | off: each step's forward and backward replayed as a CUDA graph
  // (GPU; refused with dropout, batch mixing or fp16's loss scale).
  std::string cuda_graph = "off";
  std::uint64_t loss_scale_window = 2000;

  // Optimizer and schedule.
  OptimizerConfig optimizer;
  float lr = 0.05f;
  std::string lr_scaling = "none";  // none | linear
  std::size_t reference_batch = 0;  // 0: the per-rank batch (scaling by world x accum)
  std::uint64_t warmup = 0;
  std::string schedule = "constant";  // constant | cosine | step
  std::uint64_t step_size = 1000;
  float gamma = 0.1f;
  double clip_norm = 0;            // 0: off
  std::string nonfinite = "stop";  // stop | skip:N (NonfinitePolicy)
  // Parameter kinds weight decay skips: a comma list of norm, bias, embedding
  // (parameter_groups.h); "" decays every parameter.
  std::string no_decay;
  // A finite loss far above its recent median: warn | stop (divergence_monitor.h).
  std::string on_divergence = "warn";

  // Distribution.
  std::string backend = "auto";
  double bucket_mb = kDefaultBucketMb;
  bool overlap = true;
  // BatchNorm normalises with the statistics of the whole batch over the ranks
  // (their sums all-reduced in forward and backward), not this rank's.
  bool sync_bn = false;
  double label_smoothing = 0.0;  // the training loss's (PyTorch's label_smoothing)
  std::size_t accum = 1;
  double timeout = 300;
  // The dtype gradient buckets are reduced in: fp32 | bf16 | fp16 (gradient_wire.h).
  std::string grad_dtype = "fp32";
  // 1: ZeRO-1, the optimizer state and master weights sharded over the ranks
  // (sharded_optimizer.h); 0: every rank holds all of it.
  int zero = 0;

  // Evaluation and logging.
  std::uint64_t eval_every = 0;  // 0: at the end of each epoch only
  std::uint64_t log_every = 50;
  std::string logdir;
  std::string trace;
  std::string flight_dir;
  std::uint64_t straggler_every = 100;  // 0: off  // "": <logdir>/flight, else <ckpt-dir>/flight

  // Checkpoints.
  std::string ckpt_dir;
  std::uint64_t ckpt_every = 0;
  std::size_t keep = 3;
  std::string resume;  // "" none, "latest" (in --ckpt-dir) or a file
  // A safetensors file the model starts from (rank 0 reads it; broadcast).
  std::string init_from;
  // --init-skip-mismatched: tensors of --init-from whose shape differs (a new
  // head), or that one side lacks, keep the model's initialisation.
  bool init_skip_mismatched = false;
  std::uint64_t check_every = 100;

  // Throws Error naming the flag and the value.
  void validate() const;
  void validate_optimizer_config() const;
  std::string to_json() const;
};

}  // namespace ringtrain
