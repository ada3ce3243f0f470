// `ringtrain train`: the main job.
//   mpirun -np N --machinefile hosts ringtrain train --data fashion.h5 --model cnn --batch 64
//   --epochs 5
#include <cmath>
#include <limits>

#include "apps/command.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/model/plugin.h"
#include "ringtrain/train/stop_signal.h"
#include "ringtrain/train/trainer.h"

namespace ringtrain::apps {
namespace {

struct TrainFlags {
  TrainConfig config;
  bool no_overlap = false;
  std::vector<std::string> plugins;
};

int run_train(const TrainFlags& flags, const Topology& topo) {
  TrainConfig cfg = flags.config;
  cfg.overlap = !flags.no_overlap;
  const TrainSummary s = train(cfg, topo);
  // No accuracy of nothing: an empty eval split was warned about at start-up.
  std::string test = s.test_n > 0
                         ? fmt::format("test accuracy {:.4f} (loss {:.4f}, n={})", s.test_accuracy,
                                       s.test_loss, s.test_n)
                         : std::string("no test accuracy (the eval split is empty or absent)");
  if (s.test_tokens > 0)
    test = fmt::format("test loss {:.4f} per token, perplexity {:.3f} over {} tokens", s.test_loss,
                       s.test_perplexity, s.test_tokens);
  const std::string rate = s.tokens_per_second > 0
                               ? fmt::format("{:.0f} tokens/s global", s.tokens_per_second)
                               : fmt::format("{:.0f} samples/s global", s.samples_per_second);
  log0("ringtrain: {} after {} steps ({:.2f} epochs): {}, {}{}",
       s.stopped_by_signal ? "stopped" : "done", s.steps, s.epochs, test, rate,
       s.last_checkpoint.empty() ? "" : ", checkpoint " + s.last_checkpoint);
  if (!s.stopped_by_signal) return 0;
  // A run cut short by a signal is not a success, on any rank (schedulers
  // requeue on a non-zero exit). Every rank decides by the flag, not by the
  // path (only rank 0 writes, and knows it).
  if (cfg.ckpt_dir.empty()) {
    log0("ringtrain: stopped without a checkpoint (no --ckpt-dir): nothing to resume from, exit {}",
         kStoppedUnsavedExitCode);
    return kStoppedUnsavedExitCode;
  }
  return kStoppedWithCheckpointExitCode;
}

CLI::App* add_train_command(CLI::App& app, CommandContext& ctx) {
  auto flags = std::make_shared<TrainFlags>();
  TrainConfig& c = flags->config;
  CLI::App* sub = app.add_subcommand(
      "train",
      "Synchronous data-parallel training: every rank trains on its own shard; gradients are "
      "averaged with an all-reduce that overlaps backward");
  sub->footer(
      "Example:\n  mpirun -np 2 ringtrain train --data fashion.h5 --model cnn --batch 64 --epochs "
      "5\n"
      "--batch is per rank: the global batch is batch x ranks x accum, printed at start-up.\n"
      "--global-batch G fixes the samples per step instead: each rank takes G/ranks/accum.");

  // Model and data.
  sub->add_option("--data", c.data_path, "HDF5 dataset file (make one with 'ringtrain convert')")
      ->required()
      ->check(CLI::ExistingFile);
  sub->add_option("--split", c.split, "Training split in the file")->capture_default_str();
  CLI::Option* eval_split =
      sub->add_option("--eval-split", c.eval_split,
                      "Evaluation split (test or val); without it, a file with no test split "
                      "trains without evaluation")
          ->capture_default_str();
  sub->add_flag("--cache", c.cache, "Hold the dataset in memory when it fits");
  sub->add_option("--plugin", flags->plugins,
                  "Shared library of layer types to load before the model is built (repeatable; "
                  "every rank must load the same)");
  sub->add_option("--model", c.model,
                  "Model: a preset (cnn, mlp:784-512-512-10), a layer list, or @file")
      ->capture_default_str();
  CLI::Option* batch = sub->add_option("--batch", c.batch, "Samples per rank per micro-step")
                           ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
                           ->capture_default_str();
  sub->add_option("--global-batch", c.global_batch,
                  "Samples per optimizer step, split evenly over however many ranks run "
                  "(instead of --batch): the same step at any world size, resumable on any")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 30))
      ->excludes(batch);
  CLI::Option* epochs =
      sub->add_option("--epochs", c.epochs,
                      "Passes over the training split (default 1; with --max-steps, whichever "
                      "ends first)");
  CLI::Option* max_steps =
      sub->add_option("--max-steps", c.max_steps,
                      "Train this many optimizer steps, over as many epochs as they take (as "
                      "max_steps in Lightning and Hugging Face's Trainer); with --epochs too, "
                      "whichever ends first (0: no cap)")
          ->capture_default_str();
  sub->add_option("--seed", c.seed, "Seed for initialisation, sampling and dropout")
      ->capture_default_str();
  sub->add_option("--prefetch", c.prefetch_depth, "Batches the loader thread keeps ready")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  sub->add_option("--augment", c.augment,
                  "Augmentation of training images, e.g. imagenet, cifar, or "
                  "'random_crop(32, padding=4), hflip', ending in the batch steps "
                  "mixup(alpha=A) and/or cutmix(alpha=A) (README: the augmentation language)");
  sub->add_option("--eval-transform", c.eval_transform,
                  "Transform of evaluation images (default: derived from --augment, e.g. resize "
                  "+ center crop for random_resized_crop)");
  sub->add_option("--loader-threads", c.loader_threads,
                  "Decode/augment threads per rank (with --augment or --eval-transform)")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  add_device_options(sub, ctx);
  add_tf32_option(sub, c.tf32);
  sub->add_option("--precision", c.precision,
                  "fp32, or bf16/fp16: weights of convolutions and linear layers, every "
                  "activation and activation gradient stored in 16 bits, accumulation, norms, "
                  "the loss and the optimizer in fp32 (docs/precision.md); fp16 scales the loss")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  add_layout_option(sub, c.layout);
  add_fuse_option(sub, c.fuse);
  sub->add_option(
         "--cuda-graph", c.cuda_graph,
         "on: each step's forward and backward run as a CUDA graph, captured per input "
         "slot of the prefetcher after one eager step and replayed with one launch "
         "(the same bits as eager steps; the gradient all-reduce starts after the "
         "replay instead of during backward). GPU only; refused with dropout, "
         "--augment mixup/cutmix or fp16 (their kernels' arguments change every "
         "step), and with --sync-bn. Off by default until it measures faster (docs/gpu.md)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  sub->add_option("--loss-scale-init", c.loss_scale_init,
                  "fp16: the first loss scale (halved on each overflow, whose step is skipped)")
      ->capture_default_str();
  sub->add_option("--loss-scale-window", c.loss_scale_window,
                  "fp16: clean steps after which the loss scale doubles")
      ->check(CLI::Range(std::uint64_t{1}, std::numeric_limits<std::uint64_t>::max()))
      ->capture_default_str();

  // Optimizer and schedule.
  sub->add_option("--optimizer", c.optimizer.kind, "sgd or adamw")
      ->check(CLI::IsMember({"sgd", "adamw"}))
      ->capture_default_str();
  sub->add_option("--lr", c.lr, "Base learning rate (before --lr-scaling)")->capture_default_str();
  sub->add_option("--momentum", c.optimizer.momentum, "SGD momentum (0: plain SGD)")
      ->capture_default_str();
  sub->add_flag("--nesterov", c.optimizer.nesterov, "Nesterov momentum (SGD)");
  sub->add_option("--weight-decay", c.optimizer.weight_decay,
                  "Weight decay (L2 for SGD, decoupled for AdamW)")
      ->capture_default_str();
  sub->add_option("--lr-scaling", c.lr_scaling,
                  "linear: lr x global batch / reference batch (Goyal et al.), use with --warmup")
      ->check(CLI::IsMember({"none", "linear"}))
      ->capture_default_str();
  sub->add_option("--reference-batch", c.reference_batch,
                  "Reference batch for --lr-scaling linear (0: the per-rank --batch)")
      ->capture_default_str();
  sub->add_option("--warmup", c.warmup, "Linear warm-up steps from 0 to the lr")
      ->capture_default_str();
  sub->add_option("--schedule", c.schedule, "constant, cosine (to 0 at the end) or step")
      ->check(CLI::IsMember({"constant", "cosine", "step"}))
      ->capture_default_str();
  sub->add_option("--step-size", c.step_size,
                  "step schedule: multiply by --gamma every this many steps")
      ->capture_default_str();
  sub->add_option("--gamma", c.gamma, "step schedule: the factor")->capture_default_str();
  sub->add_option("--clip-norm", c.clip_norm,
                  "Clip gradients to this global L2 norm, after the all-reduce (0: off)")
      ->capture_default_str();
  sub->add_option("--nonfinite", c.nonfinite,
                  "NaN/Inf gradients: 'stop' (naming the step, ranks and layer) or 'skip:N' "
                  "(skip the update of up to N consecutive bad steps, then stop)")
      ->capture_default_str();
  sub->add_option("--no-decay", c.no_decay,
                  "Parameters weight decay skips, a comma list of: norm (BatchNorm/LayerNorm "
                  "weight and bias), bias (every bias), embedding (embedding tables); default: "
                  "every parameter decays (NVIDIA's ResNet-50 recipe: --no-decay norm,bias)");
  sub->add_option("--on-divergence", c.on_divergence,
                  "A finite loss far above its recent median ('loss diverging at step S'): warn "
                  "and go on, or stop (exit 3)")
      ->check(CLI::IsMember({"warn", "stop"}))
      ->capture_default_str();

  // Distribution.
  sub->add_option("--backend", c.backend,
                  "Gradient all-reduce: auto (nccl on GPU, shm on CPU), nccl, shm, ring, mpi")
      ->check(CLI::IsMember({"auto", "nccl", "shm", "ring", "mpi"}))
      ->capture_default_str();
  sub->add_option("--bucket-mb", c.bucket_mb, "Gradient bucket cap in MiB (0: one bucket)")
      ->capture_default_str();
  sub->add_flag("--no-overlap", flags->no_overlap,
                "All-reduce after backward instead of during it (for comparison)");
  sub->add_option("--grad-dtype", c.grad_dtype,
                  "Dtype the gradient buckets are reduced in: fp32, or bf16/fp16 (half the bytes; "
                  "scaled by 1/world before the sum, widened back to fp32 for the optimizer)")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
  sub->add_option("--zero", c.zero,
                  "1: ZeRO-1, shard the optimizer state and fp32 master weights over the ranks "
                  "(gradients reduce-scattered per bucket, parameters all-gathered after the "
                  "update); 0: off")
      ->check(CLI::IsMember({0, 1}))
      ->capture_default_str();
  sub->add_option("--init-from", c.init_from,
                  "Start from these weights (safetensors, by name: torchvision's for the presets; "
                  "ringtrain weights export writes them)")
      ->check(CLI::ExistingFile);
  sub->add_flag("--init-skip-mismatched", c.init_skip_mismatched,
                "Fine-tuning with a new head: tensors of --init-from whose shape differs from "
                "the model's (fc [1000, 512] into [4, 512]), or that one side lacks, keep their "
                "fresh initialisation instead of refusing; what loaded and what did not is "
                "printed either way");
  sub->add_option("--label-smoothing", c.label_smoothing,
                  "Label smoothing of the training loss, in [0, 1) (0.1 in NVIDIA's ResNet-50 "
                  "recipe); evaluation reports the plain cross-entropy")
      ->check(CLI::Range(0.0, 0.999))
      ->capture_default_str();
  sub->add_flag("--sync-bn", c.sync_bn,
                "BatchNorm uses the statistics of the whole batch over all ranks (its sums are "
                "all-reduced in forward and backward); default: each rank's own micro-batch, as "
                "DDP and Horovod");
  sub->add_option("--accum", c.accum, "Micro-batches accumulated per optimizer step")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  sub->add_option("--timeout", c.timeout,
                  "Seconds any collective may wait before the job aborts, naming the late ranks")
      ->capture_default_str();

  // Evaluation and logging.
  sub->add_option("--eval-every", c.eval_every,
                  "Evaluate every this many steps (0: at each epoch end only)")
      ->capture_default_str();
  sub->add_option("--log-every", c.log_every, "Progress line every this many steps")
      ->capture_default_str();
  sub->add_option("--logdir", c.logdir, "Write metrics.jsonl and TensorBoard event files here");
  sub->add_option("--trace", c.trace,
                  "Write a Chrome trace (chrome://tracing, Perfetto) of every rank's step phases");
  sub->add_option("--straggler-every", c.straggler_every,
                  "Every this many steps, compare the ranks' phase times and name a rank whose "
                  "step is >= 1.2x the median, with the phase that makes it slow (0: off)")
      ->capture_default_str();
  sub->add_option("--flight-dir", c.flight_dir,
                  "Where each rank keeps its flight record (last collectives, current phase) for "
                  "'ringtrain doctor flight' (default: <logdir>/flight, else <ckpt-dir>/flight: "
                  "each run its own)");

  // Checkpoints.
  sub->add_option("--ckpt-dir", c.ckpt_dir, "Directory for atomic HDF5 checkpoints ckpt-<step>.h5");
  sub->add_option("--ckpt-every", c.ckpt_every,
                  "Checkpoint every this many steps (0: only at the end)")
      ->capture_default_str();
  sub->add_option("--keep", c.keep, "Checkpoints to keep")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  sub->add_option("--resume", c.resume,
                  "'latest' (newest in --ckpt-dir; starts fresh if none) or a checkpoint file");
  sub->add_option("--check-every", c.check_every,
                  "Compare parameter checksums across ranks every this many steps (0: off)")
      ->capture_default_str();

  sub->parse_complete_callback([flags, &ctx, epochs, max_steps, eval_split] {
    flags->config.eval_split_required = eval_split->count() > 0;
    // --max-steps alone sets the run's length; the default of one epoch
    // applies only when neither is given.
    if (max_steps->count() > 0 && epochs->count() == 0 && flags->config.max_steps > 0)
      flags->config.epochs = 0;
    // Before MPI starts: a bad plugin is an error on every rank, each naming
    // the file, and nothing has begun that could hang.
    load_layer_plugins(flags->plugins);
    flags->config.validate();
    ctx.stop_signals_from_start = true;
    ctx.errors_are_input = false;
    ctx.action = [flags](const Topology& topo) { return run_train(*flags, topo); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "train", 10, ringtrain::apps::add_train_command)
