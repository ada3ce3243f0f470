#include "ringtrain/train/config_agreement.h"

#include <algorithm>

namespace ringtrain {

namespace {
// A flag without a value, printed as the user gave it or not.
SignatureField switch_flag(std::string flag, bool given) {
  SignatureField f = signature_bool(std::move(flag), given);
  f.text = given ? "given" : "not given";
  return f;
}

// A path whose presence changes collectives (the checkpoint barrier, the trace
// gather, the resume broadcast) but which may be spelled differently per node.
SignatureField presence(std::string flag, const std::string& path) {
  SignatureField f = signature_bool(std::move(flag), !path.empty());
  f.text = path.empty() ? "not given" : "given (" + path + ")";
  return f;
}
}  // namespace

std::vector<SignatureField> config_agreement_fields(const TrainConfig& c) {
  return {
      // How many steps, and what each one covers.
      signature_text("--split", c.split),
      signature_text("--eval-split", c.eval_split),
      switch_flag("--cache", c.cache),
      signature_number("--batch", c.batch),
      signature_number("--global-batch", c.global_batch),
      signature_number("--epochs", c.epochs),
      signature_number("--max-steps", c.max_steps),
      signature_number("--accum", c.accum),
      signature_number("--seed", c.seed),
      signature_text("--tf32", c.tf32),
      // The numbers every rank computes with, and the loss scale (a skipped
      // overflow step must be skipped everywhere).
      signature_text("--precision", c.precision),
      // The order of activations changes the rounding of sums (BatchNorm's
      // sums, cuDNN's algorithms): replicas would drift apart.
      signature_text("--layout", c.layout),
      // Where a fused BatchNorm runs in the step moves its --sync-bn sums
      // among the others: every rank must take them in one order.
      signature_text("--fuse", c.fuse),
      // A replayed step queues every bucket's all-reduce after backward, an
      // eager one during it; and a refusal (dropout, fp16) must be every rank's.
      signature_text("--cuda-graph", c.cuda_graph),
      signature_real("--loss-scale-init", c.loss_scale_init),
      signature_number("--loss-scale-window", c.loss_scale_window),
      // The arithmetic of an update: a difference makes replicas drift apart.
      signature_text("--optimizer", c.optimizer.kind),
      signature_real("--lr", c.lr),
      signature_real("--momentum", c.optimizer.momentum),
      switch_flag("--nesterov", c.optimizer.nesterov),
      signature_real("--weight-decay", c.optimizer.weight_decay),
      signature_text("--lr-scaling", c.lr_scaling),
      signature_number("--reference-batch", c.reference_batch),
      signature_number("--warmup", c.warmup),
      signature_text("--schedule", c.schedule),
      signature_number("--step-size", c.step_size),
      signature_real("--gamma", c.gamma),
      signature_real("--clip-norm", c.clip_norm),
      signature_text("--no-decay", c.no_decay.empty() ? "not given" : c.no_decay),
      // Whether a diverging loss stops every rank.
      signature_text("--on-divergence", c.on_divergence),
      // When the ranks stop on a non-finite step.
      signature_text("--nonfinite", c.nonfinite),
      // The gradient all-reduce: backend, bucket sizes, when it starts.
      signature_text("--backend", c.backend),
      signature_real("--bucket-mb", c.bucket_mb),
      switch_flag("--no-overlap", !c.overlap),
      // What the buckets travel as, and whether they are reduce-scattered.
      signature_text("--grad-dtype", c.grad_dtype),
      signature_number("--zero", static_cast<std::uint64_t>(c.zero)),
      // BatchNorm's statistics: all-reduced in forward and backward, or not.
      switch_flag("--sync-bn", c.sync_bn),
      // What the loader makes of each sample (image sets).
      signature_text("--augment", c.augment),
      signature_text("--eval-transform", c.eval_transform),
      // The loss every rank differentiates.
      signature_real("--label-smoothing", c.label_smoothing),
      // When the ranks meet in a control collective after a step.
      signature_number("--eval-every", c.eval_every),
      signature_number("--log-every", c.log_every),
      signature_number("--straggler-every", c.straggler_every),
      signature_number("--check-every", c.check_every),
      signature_number("--ckpt-every", c.ckpt_every),
      presence("--ckpt-dir", c.ckpt_dir),
      presence("--trace", c.trace),
      signature_text("--resume", c.resume.empty()       ? "not given"
                                 : c.resume == "latest" ? "latest"
                                                        : "a file"),
  };
}

const std::vector<std::pair<std::string, std::string>>& config_flags_not_compared() {
  static const std::vector<std::pair<std::string, std::string>> flags = {
      {"--data", "a path that may differ per node; the data set's shape and sizes are compared"},
      {"--model", "compared as the hash of the parsed spec (the text may name a file)"},
      {"--logdir", "written by rank 0 only"},
      {"--flight-dir", "each rank's own records"},
      {"--keep", "applied by rank 0, which writes the checkpoints"},
      {"--timeout", "each rank's own watchdog"},
      {"--init-from", "read by rank 0 only; the other ranks get its weights in the broadcast"},
      {"--init-skip-mismatched", "applied by rank 0, which reads --init-from"},
      {"--loader-threads", "a rank's own decoding threads; the samples do not depend on them"},
  };
  return flags;
}

std::string config_key_flag(const std::string& key) {
  if (key == "overlap") return "--no-overlap";
  std::string flag = "--" + key;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

}  // namespace ringtrain
