#include "ringtrain/train/train_config.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "ringtrain/core/check.h"
#include "ringtrain/data/sample_transform.h"
#include "ringtrain/model/parameter_groups.h"
#include "ringtrain/ops/math_mode.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/sync/gradient_wire.h"
#include "ringtrain/tensor/layout.h"
#include "ringtrain/train/nonfinite_policy.h"

namespace ringtrain {

void TrainConfig::validate() const {
  RT_CHECK(!data_path.empty(),
           "--data: a dataset file is required (make one with 'ringtrain convert')");
  RT_CHECK(batch > 0, "--batch must be at least 1 (it is per rank), got {}", batch);
  RT_CHECK(global_batch == 0 || global_batch % accum == 0,
           "--global-batch {} must be a multiple of --accum {} (each micro-step takes an equal "
           "share of it)",
           global_batch, accum);
  RT_CHECK(epochs > 0 || max_steps > 0, "--epochs must be at least 1 (or give --max-steps)");
  RT_CHECK(lr > 0 && std::isfinite(lr), "--lr must be a positive number, got {}", lr);
  RT_CHECK(lr_scaling == "none" || lr_scaling == "linear",
           "--lr-scaling: unknown value '{}' (expected none or linear)", lr_scaling);
  RT_CHECK(schedule == "constant" || schedule == "cosine" || schedule == "step",
           "--schedule: unknown value '{}' (expected constant, cosine or step)", schedule);
  RT_CHECK(step_size > 0, "--step-size must be at least 1");
  RT_CHECK(gamma > 0 && gamma <= 1, "--gamma must be in (0, 1], got {}", gamma);
  RT_CHECK(clip_norm >= 0 && std::isfinite(clip_norm), "--clip-norm must be >= 0, got {}",
           clip_norm);
  RT_CHECK(bucket_mb >= 0 && bucket_mb <= 4096, "--bucket-mb must be in [0, 4096], got {}",
           bucket_mb);
  RT_CHECK(accum >= 1 && accum <= 4096, "--accum must be in [1, 4096], got {}", accum);
  RT_CHECK(timeout > 0, "--timeout must be positive seconds, got {}", timeout);
  RT_CHECK(keep >= 1, "--keep must be at least 1");
  RT_CHECK(prefetch_depth >= 1 && prefetch_depth <= 64, "--prefetch must be in [1, 64]");
  RT_CHECK(loader_threads >= 1 && loader_threads <= 256, "--loader-threads must be in [1, 256]");
  RT_CHECK(ckpt_every == 0 || !ckpt_dir.empty(), "--ckpt-every needs --ckpt-dir");
  RT_CHECK(!init_skip_mismatched || !init_from.empty(),
           "--init-skip-mismatched needs --init-from (the weights it filters)");
  RT_CHECK(resume.empty() || resume != "latest" || !ckpt_dir.empty(),
           "--resume latest needs --ckpt-dir (or give a checkpoint file)");
  RT_CHECK(backend == "auto" || backend == "nccl" || backend == "shm" || backend == "ring" ||
               backend == "mpi",
           "--backend: unknown value '{}' (expected auto, nccl, shm, ring or mpi)", backend);
  (void)parse_tf32_mode(tf32);
  (void)parse_precision(precision);
  (void)parse_layout_choice(layout);
  RT_CHECK(std::isfinite(loss_scale_init) && loss_scale_init > 0,
           "--loss-scale-init must be a positive number, got {}", loss_scale_init);
  RT_CHECK(loss_scale_window >= 1, "--loss-scale-window must be at least 1");
  (void)parse_grad_dtype(grad_dtype);
  RT_CHECK(zero == 0 || zero == 1,
           "--zero {}: expected 0 (off) or 1 (ZeRO-1: optimizer state "
           "and master weights sharded)",
           zero);
  RT_CHECK(on_divergence == "warn" || on_divergence == "stop",
           "--on-divergence: unknown value '{}' (expected warn or stop)", on_divergence);
  (void)parse_no_decay(no_decay);
  (void)NonfinitePolicy::parse(nonfinite);
  validate_optimizer_config();
}

void TrainConfig::validate_optimizer_config() const {
  ::ringtrain::validate(optimizer);
}

std::string TrainConfig::to_json() const {
  nlohmann::json j;
  j["data"] = data_path;
  j["split"] = split;
  j["eval_split"] = eval_split;
  j["cache"] = cache;
  j["model"] = model;
  j["batch"] = batch;
  j["global_batch"] = global_batch;
  j["epochs"] = epochs;
  j["max_steps"] = max_steps;
  j["seed"] = seed;
  j["augment"] = augment;
  // What evaluation uses (derived from --augment unless given): eval and
  // predict read it back, so a checkpoint is judged as it was trained.
  j["eval_transform"] = !eval_transform.empty() ? eval_transform
                        : !augment.empty()      ? SampleTransform::eval_spec_of(augment)
                                                : "";
  j["loader_threads"] = loader_threads;
  j["tf32"] = tf32;
  j["precision"] = precision;
  j["layout"] = layout;
  j["fuse"] = fuse;
  j["cuda_graph"] = cuda_graph;
  j["loss_scale_init"] = loss_scale_init;
  j["loss_scale_window"] = loss_scale_window;
  j["optimizer"] = optimizer.kind;
  j["lr"] = lr;
  j["momentum"] = optimizer.momentum;
  j["nesterov"] = optimizer.nesterov;
  j["weight_decay"] = optimizer.weight_decay;
  j["lr_scaling"] = lr_scaling;
  j["reference_batch"] = reference_batch;
  j["warmup"] = warmup;
  j["schedule"] = schedule;
  j["step_size"] = step_size;
  j["gamma"] = gamma;
  j["clip_norm"] = clip_norm;
  j["no_decay"] = no_decay;
  j["on_divergence"] = on_divergence;
  j["grad_dtype"] = grad_dtype;
  j["zero"] = zero;
  j["nonfinite"] = nonfinite;
  j["backend"] = backend;
  j["bucket_mb"] = bucket_mb;
  j["overlap"] = overlap;
  j["init_from"] = init_from;
  j["init_skip_mismatched"] = init_skip_mismatched;
  j["sync_bn"] = sync_bn;
  j["label_smoothing"] = label_smoothing;
  j["accum"] = accum;
  j["timeout"] = timeout;
  j["eval_every"] = eval_every;
  j["log_every"] = log_every;
  j["logdir"] = logdir;
  j["trace"] = trace;
  j["flight_dir"] = flight_dir;
  j["straggler_every"] = straggler_every;
  j["ckpt_dir"] = ckpt_dir;
  j["ckpt_every"] = ckpt_every;
  j["keep"] = keep;
  j["resume"] = resume;
  j["check_every"] = check_every;
  return j.dump();
}

}  // namespace ringtrain
