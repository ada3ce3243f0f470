// The step loop, as a Trainer with named phases:
//
//   set-up       data, model, start-up agreement, gradient backend, optimizer,
//                resume, rank 0's parameters to every replica
//   step         for each of --accum micro-batches:
//                  batch <- prefetcher (staged on a background thread)
//                  forward, loss added to totals on the device
//                  backward --(layer k's grads queued)--> bucket complete? start its all-reduce
//                the optimizer is ordered after every bucket; non-finite guard
//                (--nonfinite: stop, or skip the update; decided on the device
//                on a GPU, reported at the next sync point), clip, update
//   after-step   log (reads the loss totals), eval, replica check, checkpoint, stop
//
// The CPU and GPU steps are one sequence. Its ordering points are events on a
// GPU (the all-reduce after the gradient kernels, the optimizer after the
// all-reduce, a loader slot's refill after the kernels that read it) and
// nothing on the CPU, so a steady GPU step never blocks the host: host syncs
// happen at logging, evaluation and checkpoint points only, and are counted
// (host_sync) and reported per logged step.
//
// Control messages (signature, stop flag, loss, eval sums, replica hashes,
// straggler times) go over a separate host communicator, so the gradient
// backend may be NCCL. Each phase is named to the flight recorder
// (flight_recorder.h), which says where a rank was when the job went wrong.
#include "ringtrain/train/trainer.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/fault_plan.h"
#include "core/median.h"
#include "core/stream_graph.h"
#include "data/device_widening.h"
#include "ringtrain/comm/communicator.h"
#include "ringtrain/comm/control_channel.h"
#include "ringtrain/comm/flight_recorder.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/host_sync.h"
#include "ringtrain/core/input_error.h"
#include "ringtrain/core/log.h"
#include "ringtrain/core/ordering_point.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/core/writable_path.h"
#include "ringtrain/data/batch_mix.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/prefetcher.h"
#include "ringtrain/data/sample_transform.h"
#include "ringtrain/data/sharded_sampler.h"
#include "ringtrain/model/layer_registry.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/model/parameter_groups.h"
#include "ringtrain/model/presets.h"
#include "ringtrain/model/weights_io.h"
#include "ringtrain/optim/grad_clip.h"
#include "ringtrain/optim/lr_schedule.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/sync/bucket_plan.h"
#include "ringtrain/sync/gradient_sync.h"
#include "ringtrain/sync/gradient_wire.h"
#include "ringtrain/sync/run_agreement.h"
#include "ringtrain/sync/sharded_optimizer.h"
#include "ringtrain/sync/zero_layout.h"
#include "ringtrain/tensor/device_memory.h"
#include "ringtrain/train/batch_split.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/config_agreement.h"
#include "ringtrain/train/divergence_monitor.h"
#include "ringtrain/train/evaluator.h"
#include "ringtrain/train/run_lock.h"
#include "ringtrain/train/run_recorder.h"
#include "ringtrain/train/stop_signal.h"
#include "ringtrain/train/straggler_monitor.h"
#include "ringtrain/train/training_state.h"
#include "train/comm_batch_stat_reducer.h"
#include "train/flight_dir.h"
#include "train/nonfinite_guard.h"
#include "train/training_faults.h"

namespace ringtrain {

namespace {

// What predict --images needs from the training data to read new images with
// the checkpoint alone: the stored size (images are fitted to it), the bytes'
// scale and offset, and the classes with their names. Only an image set
// (uint8 C x H x W) has one; "" otherwise.
std::string image_input_record(const Dataset& data) {
  const std::vector<std::size_t>& stored = data.stored_shape();
  if (data.is_tokens() || data.stored_dtype() != SampleDType::u8 || stored.size() != 3) return "";
  nlohmann::json record = {{"stored_shape", stored},
                           {"scale", data.scale()},
                           {"offset", data.offset()},
                           {"classes", data.num_classes()}};
  if (!data.class_names().empty()) record["class_names"] = data.class_names();
  return record.dump();
}

// fp16's loss scaler as --loss-scale-init and --loss-scale-window set it
// (GradScaler's defaults: 2^16, doubled after 2000 clean steps, halved on an
// overflow).
kernels::LossScalerState initial_loss_scaler(const TrainConfig& cfg) {
  kernels::LossScalerState s;
  s.enabled = 1;
  s.scale = static_cast<float>(cfg.loss_scale_init);
  s.growth_interval = cfg.loss_scale_window;
  return s;
}
// Memory on the model's device: the --no-decay mask where the optimizer reads
// it, the mixed batch and its second labels (--augment mixup / cutmix).
struct DeviceArray {
  DeviceArray(std::size_t count, Device device, DType dtype = DType::f32)
      : view{device_allocate(count * dtype_size(dtype), device), count, dtype, device} {}
  ~DeviceArray() { device_free(view.ptr, view.device); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  BufferView view;
};

// The training loss since the last progress line, summed over ranks when it
// is printed.
struct LossWindow {
  double loss_sum = 0;
  double samples = 0;
};

// What one step did, for the after-step phase.
struct StepOutcome {
  StepTiming timing;
  std::uint64_t epoch = 0;  // the epoch the step trained in
  float lr = 0;
  double started_s = 0;
};

class Trainer {
 public:
  Trainer(const TrainConfig& cfg, const Topology& topo);
  TrainSummary run();

 private:
  // set-up
  void prove_outputs_writable() const;
  void lock_output_directories();
  void open_data_and_build_model();
  void set_image_transforms();
  void require_fixed_image_size() const;
  void set_batch_mix();
  bool eval_split_present();
  bool evaluates() const;
  int open_token_windows();
  void agree_on_run();
  void plan_steps_and_schedule();
  void make_backend_and_optimizer();
  void set_decay_mask();
  void resume_and_replicate();
  void announce() const;
  // step
  StepOutcome step();
  std::size_t forward_backward(std::size_t micro, float loss_scale, StepTiming& timing);
  // --cuda-graph on
  struct CapturedStep;
  void check_cuda_graph() const;
  CapturedStep* captured_step(const float* x, const Batch& batch, bool accumulate,
                              float grad_scale);
  void update(float lr, float loss_scale, std::uint64_t step_samples, StepTiming& timing);
  BufferView averaged_gradients();
  double clip_gradients(float loss_scale);
  void sum_over_ranks(BufferView value);
  // after-step; false when the run stops here
  bool after_step(StepOutcome& outcome);
  void log_step(StepOutcome& outcome);
  void report_divergence();
  bool stop_agreed();
  std::string checkpoint(bool finished);
  EvalResult evaluate_now();
  void average_buffers();
  // Names the phase for the flight recorder (and the fault hooks).
  void phase(std::string_view name);
  bool loss_scaling() const { return precision_ == DType::f16; }

  const TrainConfig& cfg_;
  const Topology& topo_;
  const Device device_;
  const DType precision_;  // --precision, parsed once
  CommOptions comm_options_;
  std::unique_ptr<Communicator> control_;

  std::optional<Dataset> train_data_, eval_data_;
  std::optional<ModelSpec> spec_;
  std::unique_ptr<Model> model_;
  std::optional<ShardedSampler> sampler_;
  std::size_t sampler_global_batch_ = 0, global_batch_ = 0, micro_per_epoch_ = 0;

  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<CommBatchStatReducer> bn_sync_;  // --sync-bn; the model points at it
  BufferView grads_;
  std::unique_ptr<Optimizer> optimizer_;
  std::uint64_t total_steps_ = 0;
  float base_lr_ = 0;
  std::optional<LrSchedule> schedule_;
  std::optional<GradientSynchronizer> sync_;
  std::optional<ZeroLayout> zero_layout_;    // --zero 1
  ShardedOptimizer* zero_ = nullptr;         // optimizer_, under --zero 1
  std::unique_ptr<GradClipper> clipper_;     // --clip-norm, or --zero 1's norm
  std::unique_ptr<DeviceArray> decay_mask_;  // --no-decay
  // --augment mixup / cutmix: the draws, and where the mixed batch and its
  // second labels are written (max_batch rows, on the model's device).
  BatchMixSpec batch_mix_spec_;
  std::optional<BatchMixer> mixer_;
  std::unique_ptr<DeviceArray> mixed_x_, mixed_second_;
  DivergenceMonitor divergence_;
  std::uint64_t divergence_reported_step_ = 0;  // the device watch's, once warned
  std::optional<NonfiniteGuard> nonfinite_;
  std::optional<StragglerMonitor> stragglers_;
  ResumePoint start_;

  std::optional<RunLock> run_lock_;  // rank 0: --logdir and --ckpt-dir are this run's
  std::optional<RunRecorder> recorder_;
  std::optional<StopSignalHandler> stop_handler_;
  std::optional<Prefetcher> prefetcher_;
  std::unique_ptr<TrainingFaults> faults_;  // null unless a test plants a fault (fault_plan.h)

  // loop state
  DataCursor cursor_;
  std::uint64_t step_ = 0;
  LossWindow window_;
  OrderingPoint previous_batch_done_;  // behind the kernels that read the last batch
  std::uint64_t host_syncs_between_logs_ = 0;
  std::vector<double> window_step_s_;  // rank 0's step times since the last log
  double window_exposed_s_ = 0;        // and their exposed all-reduce time
  // Step times after the first progress window, for the run's median (the
  // first million: 8 MiB at most).
  std::vector<double> measured_step_s_;
  std::uint64_t run_steps_ = 0;
  std::int32_t stop_flag_ = 0;  // in flight while stop_request_ is
  CommRequest stop_request_;
  bool stop_in_flight_ = false;
  // --cuda-graph on: forward + backward captured per (input slot, labels,
  // accumulate, samples, gradient scale); the per-layer gradient callbacks'
  // order, from an eager backward, replayed after a graph; the (samples,
  // accumulate) pairs that have run eagerly once (their plans exist).
  struct CapturedStep {
    const void* x = nullptr;
    const void* y = nullptr;
    bool accumulate = false;
    std::size_t samples = 0;
    float grad_scale = 0;
    std::unique_ptr<detail::StreamGraph> graph;
  };
  std::vector<CapturedStep> captured_;
  // detail::graph_buffers_generation() when captured_ was last emptied: a
  // workspace moved since (a larger evaluation batch) empties it again.
  std::uint64_t captured_generation_ = 0;
  std::vector<std::size_t> backward_layer_order_;
  bool backward_order_known_ = false;
  std::vector<std::pair<std::size_t, bool>> warmed_;
  bool captured_full_noted_ = false;
  bool capture_failed_ = false;  // a capture failed: eager steps from then on
  double run_seconds_ = 0;
  std::uint64_t run_samples_ = 0;
  EvalResult last_eval_;
  bool have_eval_ = false;
  TrainSummary summary_;
};

Trainer::Trainer(const TrainConfig& cfg, const Topology& topo)
    : cfg_(cfg), topo_(topo), device_(topo.device()), precision_(parse_precision(cfg.precision)) {
  as_input_error([&] { cfg_.validate(); });
  // A bad RINGTRAIN_FAULT_* value is bad input too (exit 2), found before any work.
  const FaultPlan* const fault_plan = FaultPlan::planned();
  // First (unless `ringtrain train` installed it before MPI started): a
  // SIGTERM or SIGUSR1 during start-up (Slurm can signal a requeued job at
  // once) then only sets the flag, and the run stops with a checkpoint after
  // its first step instead of dying without one.
  if (!stop_handler_installed()) stop_handler_.emplace();
  comm_options_.timeout_seconds = cfg_.timeout;
  flight::set_identity(topo_.rank(), topo_.world_size(), topo_.host(), device_name(device_));
  // Every output is proven writable on the ranks that write it, before any
  // work: bad input (exit 2), not a failure after the last step that a
  // restarting wrapper would retry. Then no other run may write there.
  as_input_error([&] { prove_outputs_writable(); });
  // The control channel: small host messages, always over MPI.
  comm_options_.flight_channel = "control";
  control_ = make_control_communicator(topo_, comm_options_);
  comm_options_.flight_channel = "gradients";
  // Then no other run may write there, and no rank writes there before every
  // rank knows that rank 0 holds the directories.
  lock_output_directories();
  if (const std::string dir = flight_dir(cfg_); !dir.empty()) flight::start(dir);
  flight::enter_phase("setup", 0);
  // Bad data, model, flags that differ across ranks or a checkpoint that does
  // not fit end the job with kInputErrorExitCode: no restart would help.
  as_input_error([&] {
    // The flags first: a flag that differs may make one rank's set-up fail on
    // its own (a split too small for its batch), and the message should name
    // the flag, not that symptom.
    agree_on_signature(*control_, config_agreement_fields(cfg_));
    open_data_and_build_model();
    agree_on_run();
    plan_steps_and_schedule();
    check_cuda_graph();
  });
  make_backend_and_optimizer();
  as_input_error([&] { resume_and_replicate(); });
  announce();
  recorder_.emplace(cfg_, topo_, total_steps_,
                    start_.path.empty() ? std::nullopt : std::optional<std::uint64_t>(start_.step));
  recorder_->set_optimizer_state_bytes(optimizer_->state_bytes());
  prefetcher_.emplace(*train_data_, *sampler_, start_.cursor, cfg_.prefetch_depth, device_);
  if (device_.is_cuda() && device_widening(*train_data_))
    log0("data: uint8 batches cross to the GPU as bytes, widened{} on the device",
         train_data_->transform() ? " and normalised" : "");
  cursor_ = sampler_->normalize(start_.cursor);
  step_ = start_.step;
  faults_ = make_training_faults(fault_plan, topo_.rank(), *model_, grads_);
}

void Trainer::prove_outputs_writable() const {
  if (topo_.rank() == 0) {
    // Rank 0 writes the checkpoints, the metrics and the merged trace.
    if (!cfg_.ckpt_dir.empty()) ensure_writable_directory("--ckpt-dir", cfg_.ckpt_dir);
    if (!cfg_.logdir.empty()) ensure_writable_directory("--logdir", cfg_.logdir);
    if (!cfg_.trace.empty()) ensure_writable_file("--trace", cfg_.trace);
  }
  // Every rank keeps its own flight record.
  if (const std::string dir = flight_dir(cfg_); !dir.empty())
    ensure_writable_directory(!cfg_.flight_dir.empty() ? "--flight-dir"
                              : !cfg_.logdir.empty()   ? "--logdir (its flight/)"
                                                       : "--ckpt-dir (its flight/)",
                              dir);
}

// Two jobs on one directory would interleave metrics.jsonl and overwrite each
// other's checkpoints: the second is refused (run_lock.h). Rank 0 writes
// both directories and takes their lock; every rank learns whether it did
// before any of them writes there. A refused job's rank 1 once went on to
// open its flight record in the running job's flight/ with O_TRUNC, under
// that job's rank 1, which had it mapped: a SIGBUS killed the running job.
void Trainer::lock_output_directories() {
  std::exception_ptr refusal;
  if (topo_.rank() == 0) {
    try {
      // A holder on another host may be a node lost before this restart:
      // waited for within the other ranks' patience (--timeout).
      as_input_error([&] {
        run_lock_.emplace(std::vector<std::string>{"--ckpt-dir", "--logdir"},
                          std::vector<std::string>{cfg_.ckpt_dir, cfg_.logdir},
                          std::min(120.0, cfg_.timeout / 2));
      });
    } catch (...) {
      refusal = std::current_exception();
    }
  }
  std::int32_t refused = refusal ? 1 : 0;
  BufferView flag{&refused, 1, DType::i32, Device::cpu()};
  control_->allreduce(flag, flag, ReduceOp::max);
  if (refusal) std::rethrow_exception(refusal);
  if (refused != 0)
    throw InputError(
        "rank 0 refused the run: its --logdir or --ckpt-dir is in use by another run (rank 0 "
        "names it)");
}

// Whether the file holds the evaluation split. A file with a training split
// only (the user holds no test set) trains without evaluation when
// --eval-split was not given; a split the user named must exist. The ranks
// agree (their files may differ, and one rank may have named the split while
// another did not), so that all open it collectively or none: every rank takes
// part in the all-reduce, and a rank that must open it says yes.
bool Trainer::eval_split_present() {
  std::int32_t present = 1;
  if (!cfg_.eval_split_required) {
    try {
      const std::vector<std::string> splits = Dataset::splits(cfg_.data_path);
      present = std::find(splits.begin(), splits.end(), cfg_.eval_split) != splits.end() ? 1 : 0;
    } catch (const Error&) {
      // Said by the collective open that follows.
    }
  }
  BufferView flag{&present, 1, DType::i32, Device::cpu()};
  control_->allreduce(flag, flag, ReduceOp::max);
  return present != 0;
}

bool Trainer::evaluates() const {
  return eval_data_ && eval_data_->size() > 0;
}

void Trainer::open_data_and_build_model() {
  train_data_.emplace(Dataset::open_on_all_ranks(cfg_.data_path, cfg_.split, *control_));
  if (eval_split_present())
    eval_data_.emplace(Dataset::open_on_all_ranks(cfg_.data_path, cfg_.eval_split, *control_));
  spec_.emplace(ModelSpec::parse(cfg_.model));
  int classes = train_data_->num_classes();
  if (train_data_->is_tokens()) classes = open_token_windows();
  set_image_transforms();
  require_fixed_image_size();
  RT_CHECK(!eval_data_ || eval_data_->sample_shape() == train_data_->sample_shape(),
           "{}: sample shape {} differs from {}'s {}", eval_data_->describe(),
           shape_string(eval_data_->sample_shape()), train_data_->describe(),
           shape_string(train_data_->sample_shape()));
  if (cfg_.cache) {
    train_data_->enable_cache(0, topo_.local_size());
    if (eval_data_) eval_data_->enable_cache(0, topo_.local_size());
  }
  sampler_.emplace(make_train_sampler(cfg_, train_data_->size(), topo_.rank(), topo_.world_size()));
  ModelOptions model_options;
  model_options.device = device_;
  model_options.seed = cfg_.seed;
  model_options.max_batch = sampler_->max_batch_per_rank();
  model_options.tf32 = parse_tf32_mode(cfg_.tf32);
  model_options.label_smoothing = static_cast<float>(cfg_.label_smoothing);
  model_options.precision = precision_;
  model_options.layout = parse_layout_choice(cfg_.layout);
  model_options.fuse = cfg_.fuse == "on";
  model_ = Model::build(*spec_, train_data_->sample_shape(), classes, model_options);
  set_batch_mix();
  sampler_global_batch_ = sampler_->global_batch();
  global_batch_ = sampler_global_batch_ * cfg_.accum;
  micro_per_epoch_ = sampler_->steps_per_epoch();
}

// Token data: samples are windows of the model's context (a GPT preset's, or
// the spec's input(T)). Training takes full windows; evaluation keeps the
// partial last one, so that every token of the split is predicted once.
// Returns the model's output classes: its fixed vocabulary (gpt2), else the data's.
int Trainer::open_token_windows() {
  const auto lm = language_model_shape(spec_->preset);
  const std::size_t context = lm                               ? lm->context
                              : spec_->input_shape.size() == 1 ? spec_->input_shape[0]
                                                               : 0;
  RT_CHECK(context > 0,
           "{} holds tokens, and model '{}' does not fix a context: use a language-model preset "
           "(gpt-nano, gpt2, gpt2-medium) or begin the layer list with input(T)",
           train_data_->describe(), spec_->describe());
  RT_CHECK(!eval_data_ || eval_data_->is_tokens(), "{} holds tokens but {} does not",
           train_data_->describe(), eval_data_->describe());
  RT_CHECK(!eval_data_ || eval_data_->num_classes() == train_data_->num_classes(),
           "{}: vocab_size {} differs from {}'s {}", eval_data_->describe(),
           eval_data_->num_classes(), train_data_->describe(), train_data_->num_classes());
  RT_CHECK(cfg_.augment.empty() && cfg_.eval_transform.empty(),
           "{} holds tokens: --augment and --eval-transform apply to images only",
           train_data_->describe());
  train_data_->set_token_context(context, /*keep_partial=*/false);
  if (eval_data_) eval_data_->set_token_context(context, /*keep_partial=*/true);
  RT_CHECK(train_data_->size() > 0,
           "{}: {} tokens make no full window of {} + 1 tokens: the training split is too short "
           "for this model's context",
           train_data_->describe(), train_data_->token_count(), context);
  const auto data_vocab = static_cast<std::size_t>(train_data_->num_classes());
  if (!lm || lm->vocab == 0) return train_data_->num_classes();
  RT_CHECK(data_vocab <= lm->vocab,
           "{}: vocab_size {} is larger than model {}'s vocabulary of {} tokens",
           train_data_->describe(), data_vocab, spec_->preset, lm->vocab);
  return static_cast<int>(lm->vocab);
}

void Trainer::set_image_transforms() {
  // Random choices come from (--seed, epoch, index): the same on every rank
  // and thread, and after a resume.
  if (!cfg_.augment.empty()) {
    auto transform = SampleTransform::parse(cfg_.augment, cfg_.seed, "--augment");
    batch_mix_spec_ = transform->batch_mix();
    // Batch steps alone leave the samples as stored: no per-sample transform
    // (and then any float samples, not only images, may be mixed up).
    if (!transform->per_sample_empty() || !batch_mix_spec_.any()) {
      train_data_->set_transform(std::move(transform), cfg_.loader_threads);
      log0("data: --augment {} (on {} loader thread(s) per rank): samples {}",
           train_data_->transform()->describe(), cfg_.loader_threads,
           shape_string(train_data_->sample_shape()));
    }
  }
  const std::string eval = !cfg_.eval_transform.empty() ? cfg_.eval_transform
                           : !cfg_.augment.empty() ? SampleTransform::eval_spec_of(cfg_.augment)
                                                   : "";
  if (eval_data_ && !eval.empty() && eval != "none") {
    eval_data_->set_transform(SampleTransform::parse(eval, cfg_.seed, "--eval-transform"),
                              cfg_.loader_threads);
    log0("data: evaluation transform {}", eval_data_->transform()->describe());
  }
}

// --augment's batch steps: mixup blends input floats, so a model that reads
// token ids (a language model) is refused; cutmix cuts boxes out of images
// (BatchMixer refuses other samples). Evaluation is never mixed.
void Trainer::set_batch_mix() {
  if (!batch_mix_spec_.any()) return;
  const bool reads_tokens = model_->rows_per_sample() != 1 || [&] {
    for (std::size_t i = 0; i < model_->layer_count(); ++i)
      if (model_->layer_kind(i) == "token_embedding") return true;
    return false;
  }();
  RT_CHECK(!reads_tokens,
           "--augment {}: mixup and cutmix blend input floats, and model '{}' reads token ids (a "
           "language model)",
           batch_mix_spec_.describe(), spec_->describe());
  mixer_.emplace(batch_mix_spec_, cfg_.seed, train_data_->sample_shape(), "--augment");
  const std::size_t rows = model_->max_batch();
  mixed_x_ = std::make_unique<DeviceArray>(rows * mixer_->sample_elements(), device_);
  mixed_second_ = std::make_unique<DeviceArray>(rows, device_, DType::i32);
  log0("data: --augment batch step(s) {}, drawn from (--seed, step, rank); evaluation unmixed",
       batch_mix_spec_.describe());
}

// JPEG images converted without --size keep their own sizes (stored 0 x 0):
// a batch needs one size, which only a transform gives. Said as such, before
// the model is built for a [3, 0, 0] input.
void Trainer::require_fixed_image_size() const {
  const auto varying = [](const Dataset& d) { return d.sample_elements() == 0; };
  RT_CHECK(!varying(*train_data_),
           "{} holds images of different sizes (converted without --size): training needs one "
           "size per batch: give --augment with a crop or resize that ends at a fixed size (e.g. "
           "--augment 'random_resized_crop(224), hflip' or --augment 'resize((32,32))'), or "
           "convert again with --size H,W",
           train_data_->describe());
  RT_CHECK(!eval_data_ || !varying(*eval_data_),
           "{} holds images of different sizes (converted without --size): evaluation needs one "
           "size: give --eval-transform 'resize((H,W))' or 'resize(S), center_crop(C)', or convert "
           "again with --size H,W",
           eval_data_->describe());
}

void Trainer::agree_on_run() {
  // What the ranks built and read (the flags agreed before).
  agree_on_signature(
      *control_,
      {{"model spec hash", spec_->hash(), fmt::format("{:016x}", spec_->hash())},
       signature_number("parameter count", model_->param_count()),
       signature_text("parameter dtype", std::string(dtype_name(DType::f32))),
       signature_text("dataset sample shape", shape_string(train_data_->sample_shape())),
       signature_number("dataset classes", static_cast<std::uint64_t>(train_data_->num_classes())),
       signature_number("dataset train samples", train_data_->size()),
       signature_number("dataset eval samples", eval_data_ ? eval_data_->size() : 0),
       {"layer plugins", LayerRegistry::global().signature()}});
}

void Trainer::plan_steps_and_schedule() {
  total_steps_ = static_cast<std::uint64_t>(cfg_.epochs) * micro_per_epoch_ / cfg_.accum;
  if (cfg_.max_steps > 0)
    total_steps_ = cfg_.epochs > 0 ? std::min(total_steps_, cfg_.max_steps) : cfg_.max_steps;
  RT_CHECK(total_steps_ > 0,
           "nothing to train: {} epoch(s) of {} global batches of {} make 0 optimizer steps with "
           "--accum {}",
           cfg_.epochs, micro_per_epoch_, sampler_global_batch_, cfg_.accum);
  base_lr_ = cfg_.lr;
  if (cfg_.lr_scaling == "linear") {
    const std::size_t reference =
        cfg_.reference_batch ? cfg_.reference_batch : default_reference_batch(cfg_);
    base_lr_ = linear_scaled_lr(cfg_.lr, global_batch_, reference);
  }
  LrScheduleConfig schedule_config;
  schedule_config.kind = cfg_.schedule;
  schedule_config.base_lr = base_lr_;
  schedule_config.warmup_steps = cfg_.warmup;
  schedule_config.total_steps = total_steps_;
  schedule_config.step_size = cfg_.step_size;
  schedule_config.gamma = cfg_.gamma;
  // A warm-up that outlasts the run never reaches --lr: the whole run trains
  // at a fraction of it (lr 2.7e-20 at step 1 of a 1e6-step warm-up).
  RT_CHECK(cfg_.warmup < total_steps_,
           "--warmup {} is not shorter than the run's {} optimizer steps: the learning rate would "
           "never reach its {:g} (it would end at {:g}); lower --warmup",
           cfg_.warmup, total_steps_, base_lr_,
           base_lr_ * static_cast<double>(total_steps_) / static_cast<double>(cfg_.warmup));
  schedule_.emplace(schedule_config);
}

void Trainer::make_backend_and_optimizer() {
  // Only after the ranks agree: the backend's collective set-up (the shm window
  // sized by the parameter count) would otherwise fail less clearly.
  comm_ = make_communicator(cfg_.backend, topo_, comm_options_);
  // The gradients live where the backend reduces best (the shm window: no copy).
  grads_ = comm_->allocate(model_->param_count(), DType::f32);
  model_->bind_gradient_buffer(grads_);
  if (cfg_.sync_bn) {
    if (model_->buffer_count() == 0)
      log0("--sync-bn: the model has no BatchNorm; nothing to synchronise");
    bn_sync_ = std::make_unique<CommBatchStatReducer>(*comm_, device_, model_->compute_stream());
    model_->set_batch_stat_reducer(bn_sync_.get());
  }

  std::vector<std::pair<std::size_t, std::size_t>> ranges;
  for (std::size_t l = 0; l < model_->layer_count(); ++l) {
    const auto [begin, end] = model_->layer_param_range(l);  // [begin, end)
    ranges.emplace_back(begin, end - begin);
  }
  BucketPlan plan(ranges, sizeof(float),
                  static_cast<std::size_t>(cfg_.bucket_mb * 1024.0 * 1024.0));
  if (cfg_.zero == 1) zero_layout_.emplace(plan, topo_.world_size(), topo_.rank());
  sync_.emplace(*comm_, std::move(plan), grads_, cfg_.overlap, model_->compute_stream(),
                gradient_reduce_op(cfg_));
  sync_->configure(parse_grad_dtype(cfg_.grad_dtype), zero_layout_ ? &*zero_layout_ : nullptr);
  if (zero_layout_) {
    auto sharded = std::make_unique<ShardedOptimizer>(cfg_.optimizer, *zero_layout_, *comm_,
                                                      sync_->shard_gradients(), device_,
                                                      model_->compute_stream());
    zero_ = sharded.get();
    optimizer_ = std::move(sharded);
  } else {
    optimizer_ = make_optimizer(cfg_.optimizer, model_->param_count(), device_);
  }
  set_decay_mask();
  if (cfg_.clip_norm > 0 || zero_ != nullptr) clipper_ = std::make_unique<GradClipper>(device_);
  nonfinite_.emplace(NonfinitePolicy::parse(cfg_.nonfinite), *control_, *model_, cfg_.ckpt_dir,
                     device_, model_->loss_totals_view());
  if (loss_scaling()) nonfinite_->set_loss_scaler(initial_loss_scaler(cfg_));
  // On a GPU the update is gated on the decision the device takes, and
  // queued on the stream that computed the gradients.
  optimizer_->set_update_gate(nonfinite_->gate());
  optimizer_->set_stream(model_->compute_stream());
  sync_->set_local_check([this](BufferView slice, std::size_t offset) {
    nonfinite_->check_local(slice, offset, model_->compute_stream());
  });
  stragglers_.emplace(topo_.world_size() > 1 ? cfg_.straggler_every : 0);
}

void Trainer::set_decay_mask() {
  const NoDecay groups = parse_no_decay(cfg_.no_decay);
  if (!groups.any()) return;
  const std::vector<float> mask = decay_mask(*model_, groups);
  decay_mask_ = std::make_unique<DeviceArray>(mask.size(), device_);
  copy_view(decay_mask_->view, view_of(mask.data(), mask.size()));
  optimizer_->set_decay_mask(decay_mask_->view);
  const std::vector<std::string> exempt = exempt_tensors(*model_, groups);
  log0("  --no-decay {}: {} of {} parameter tensors without weight decay{}", groups.to_string(),
       exempt.size(), model_->param_info().size(),
       cfg_.optimizer.weight_decay == 0.f ? " (--weight-decay is 0: nothing decays anyway)" : "");
}

void Trainer::resume_and_replicate() {
  if (cfg_.resume.empty() && !cfg_.ckpt_dir.empty() && topo_.rank() == 0) {
    // A fresh run must not mix its checkpoints with an earlier run's: resume
    // latest would later pick whichever has the higher step.
    const auto existing = latest_checkpoint(cfg_.ckpt_dir);
    RT_CHECK(!existing,
             "--ckpt-dir {} already holds checkpoints of another run (newest: {}): pass --resume "
             "latest to continue it, or choose an empty directory",
             cfg_.ckpt_dir, existing.value_or(""));
  }
  RT_CHECK(cfg_.init_from.empty() || cfg_.resume.empty(),
           "--init-from and --resume both give the starting weights: choose one");
  // Rank 0's weights are everyone's after the broadcast below.
  if (!cfg_.init_from.empty() && topo_.rank() == 0) {
    ImportOptions import;
    import.skip_mismatched = cfg_.init_skip_mismatched;
    import.skip_flag = "--init-skip-mismatched";
    const ImportReport loaded =
        import_weights(*model_, read_safetensors(cfg_.init_from), cfg_.init_from, import);
    // Always said: a fine-tuning run whose head (or more) kept its fresh
    // weights must not pass for one that loaded everything.
    log0("--init-from {}: {}", cfg_.init_from, loaded.describe());
  }
  if (!cfg_.resume.empty())
    start_ =
        resume_training_state(cfg_, *control_, *spec_, *model_, *optimizer_, sampler_global_batch_);
  // The parameters were written by kernels and copies on the default stream
  // (initialisation, a resumed checkpoint): the backend's stream waits for them.
  comm_->order_after(OrderingPoint::record(device_, nullptr));
  comm_->broadcast(model_->params(), model_->params(), 0);
  if (model_->buffer_count() > 0) comm_->broadcast(model_->buffers(), model_->buffers(), 0);
  for (auto& s : optimizer_->state()) comm_->broadcast(s.view, s.view, 0);
  // ZeRO-1: each rank keeps its blocks of the (resumed) state and the weights.
  if (zero_ != nullptr) {
    zero_->scatter_state();
    zero_->load_master(model_->params());
  }
  if (start_.resumed) {
    // Proof that every rank continues from the checkpoint's parameters (a
    // restart on fewer nodes included): one host copy, once, at start-up.
    const BufferView params = model_->params();
    std::vector<float> host(params.count);
    copy_view(view_of(host.data(), host.size()), params);
    start_.params_hash = hash_bytes(host.data(), host.size() * sizeof(float));
    check_replicas(*control_, start_.params_hash, start_.step);
  }
  optimizer_->set_step_count(start_.step);
  if (loss_scaling() && start_.loss_scale.scale > 0) {
    kernels::LossScalerState scaler = initial_loss_scaler(cfg_);
    scaler.scale = static_cast<float>(start_.loss_scale.scale);
    scaler.growth_tracker = start_.loss_scale.growth_tracker;
    scaler.overflows = start_.loss_scale.overflows;
    nonfinite_->set_loss_scaler(scaler);
  }
  RT_CHECK(start_.step <= total_steps_,
           "checkpoint {} is at step {}, past the {} steps this run asks for", start_.path,
           start_.step, total_steps_);
}

void Trainer::announce() const {
  log0("ringtrain train: {} rank(s) on {} node(s), backend {}{}, device {}", topo_.world_size(),
       topo_.node_count(), comm_->name(),
       device_.is_cuda() && comm_->name() != "nccl"
           ? " (GPU buffers staged through pinned host memory)"
           : "",
       device_name(device_));
  log0("  model {} ({} parameters, hash {:016x}), data {} ({} samples, shape {}, {} classes)",
       spec_->to_string(), model_->param_count(), spec_->hash(), train_data_->describe(),
       train_data_->size(), shape_string(train_data_->sample_shape()), train_data_->num_classes());
  log0("  precision {}, activations {} (--layout {})", cfg_.precision,
       layout_name(model_->layout()), cfg_.layout);
  // On a GPU, which attention runs: cuDNN's SDPA, or ringtrain's own kernels
  // and why (gpt2's preset keeps dropout 0.1, which SDPA does not run), so
  // that a slow run says so at its start.
  if (device_.is_cuda())
    for (std::size_t i = 0; i < model_->layer_count(); ++i)
      if (model_->layer_kind(i) == "causal_self_attention") {
        log0("  attention: {}", model_->layer_kernels(i));
        break;
      }
  if (cfg_.cuda_graph == "on")
    log0(
        "  --cuda-graph on: each step's forward and backward replayed as a CUDA graph (captured "
        "per input slot after one eager step); the gradient all-reduce starts after the replay");
  log0("  {}; effective lr {:g}{}", describe_batch_split(cfg_, *sampler_), base_lr_,
       cfg_.lr_scaling == "linear"
           ? fmt::format(" (linear scaling of {:g}, warmup {} steps)", cfg_.lr, cfg_.warmup)
           : std::string());
  log0("  {} optimizer steps ({} per epoch), {} gradient bucket(s) of at most {:g} MiB, overlap {}",
       total_steps_, micro_per_epoch_ / cfg_.accum, sync_->plan().buckets().size(), cfg_.bucket_mb,
       cfg_.overlap ? "on" : "off");
  log0("  gradients reduced in {}{}; optimizer state {} bytes per rank{}",
       grad_dtype_name(sync_->wire_dtype()),
       zero_ != nullptr ? " (reduce-scattered per bucket: --zero 1)" : "",
       optimizer_->state_bytes(),
       zero_ != nullptr
           ? fmt::format(" (sharded over {} ranks: {} of {} elements, plus {} bytes of master "
                         "weights)",
                         topo_.world_size(), zero_layout_->shard_count(), model_->param_count(),
                         zero_->master_bytes())
           : std::string());
  // (Every rank agreed on the eval split's size: they all skip evaluation.)
  if (!eval_data_)
    log0(
        "  {} has no /{} split: training only, evaluation skipped (give --eval-split to name "
        "another split)",
        train_data_->path(), cfg_.eval_split);
  else if (eval_data_->size() == 0 && topo_.rank() == 0)
    log_warn(
        "--eval-split {}: {} is empty: this run evaluates nothing and reports no test "
        "accuracy",
        cfg_.eval_split, eval_data_->describe());
  if (!start_.path.empty())
    log0(
        "  resumed from {} at step {} (epoch {}, step {} of the epoch); parameters hash {:016x} "
        "on every rank",
        start_.path, start_.step, start_.cursor.epoch, start_.cursor.step, start_.params_hash);
}

StepOutcome Trainer::step() {
  StepOutcome out;
  const std::uint64_t syncs_before = host_sync::count();
  out.started_s = monotonic_seconds();
  out.epoch = cursor_.epoch;
  nonfinite_->begin_step(model_->compute_stream());
  // fp16: backward differentiates the loss times this; the gradients are
  // divided by it before the update. (On a GPU the scale is read back from
  // the device's decision: one host sync per step.)
  const float loss_scale = loss_scaling() ? nonfinite_->loss_scaler(/*current=*/true).scale : 1.0f;
  std::uint64_t step_samples = 0;
  for (std::size_t micro = 0; micro < cfg_.accum; ++micro)
    step_samples += forward_backward(micro, loss_scale, out.timing);
  phase("all-reduce wait");
  sync_->finish();
  out.timing.exposed_comm = sync_->exposed_seconds();
  out.timing.comm_span = sync_->comm_span_seconds();
  recorder_->trace_gradient_sync(*sync_);

  const double t_opt = monotonic_seconds();
  phase("optimizer");
  out.lr = schedule_->lr_at(step_);
  update(out.lr, loss_scale, step_samples, out.timing);
  out.timing.allreduce_bytes =
      sync_->wire_bytes() + (zero_ != nullptr ? zero_->gathered_bytes() : 0);
  out.timing.skipped_steps = nonfinite_->skipped();
  out.timing.optimizer = monotonic_seconds() - t_opt;
  recorder_->trace_optimizer(t_opt, t_opt + out.timing.optimizer);

  ++step_;
  out.timing.host_syncs = host_sync::count() - syncs_before;
  out.timing.total = monotonic_seconds() - out.started_s;
  run_seconds_ += out.timing.total;
  run_samples_ += global_batch_;
  return out;
}

// One micro-batch of the step: forward adds its loss to the totals, backward
// its gradients; on the last one each bucket's all-reduce starts as soon as
// backward has completed the bucket. Returns the batch's samples.
std::size_t Trainer::forward_backward(std::size_t micro, float loss_scale, StepTiming& timing) {
  Model& model = *model_;
  const bool last = micro + 1 == cfg_.accum;
  MicroBatchTimes t;
  t.data = monotonic_seconds();
  phase("data");  // (a fault stall here counts as data wait)
  Batch batch = prefetcher_->next(previous_batch_done_);
  timing.data_wait += monotonic_seconds() - t.data;
  RT_CHECK(batch.cursor == cursor_,
           "internal: prefetcher at epoch {} step {}, trainer at epoch {} step {}",
           batch.cursor.epoch, batch.cursor.step, cursor_.epoch, cursor_.step);
  model.set_dropout_context(static_cast<std::uint64_t>(topo_.rank()), step_ * cfg_.accum + micro);
  t.forward = monotonic_seconds();
  phase("forward");
  const float* x = batch.x.as<const float>();
  if (mixer_) {
    // Mixed where the batch already is (the model's device, on its compute
    // stream, so before the forward that reads it), into the trainer's own
    // buffers: the loader's slot stays as loaded.
    const BatchMixDraw draw =
        mixer_->draw(step_ * cfg_.accum + micro, static_cast<std::uint64_t>(topo_.rank()));
    mixer_->apply(draw, batch.x, batch.y, batch.size, mixed_x_->view, mixed_second_->view,
                  model.compute_stream());
    model.set_label_mix({mixed_second_->view.as<const std::int32_t>(), draw.lam});
    x = mixed_x_->view.as<const float>();
  }
  // The step's gradient scale is known before its forward: the loss's
  // backward runs there, in the same pass over the logits (the fused
  // classifier; the same bits as backward's own).
  const float grad_scale = micro_batch_grad_scale(cfg_, batch.size) * loss_scale;
  if (CapturedStep* captured = captured_step(x, batch, micro > 0, grad_scale)) {
    // One launch for the forward and backward; each bucket's all-reduce then
    // starts after it, in the order backward completes them.
    sync_->begin_step(/*sync=*/last);
    captured->graph->replay(model.compute_stream());
    t.backward = monotonic_seconds();
    timing.forward += t.backward - t.forward;
    phase("backward");
    for (std::size_t layer : backward_layer_order_) sync_->on_layer_ready(layer);
  } else {
    model.forward_accumulate_fused_loss(x, batch.y.as<const std::int32_t>(), batch.size,
                                        grad_scale);
    if (faults_ && last) faults_->after_forward(step_ + 1);
    t.backward = monotonic_seconds();
    timing.forward += t.backward - t.forward;
    phase("backward");
    sync_->begin_step(/*sync=*/last);
    const bool record = !backward_order_known_;
    model.backward(grad_scale, /*accumulate=*/micro > 0, [this, record](std::size_t layer) {
      if (faults_) faults_->after_backward_layer(layer, step_ + 1);
      if (record) backward_layer_order_.push_back(layer);
      sync_->on_layer_ready(layer);
    });
    backward_order_known_ = true;
  }
  // The batch's slot may be refilled once backward's kernels have read it.
  previous_batch_done_ = OrderingPoint::record(device_, model.compute_stream());
  t.end = monotonic_seconds();
  timing.backward += t.end - t.backward;
  recorder_->trace_micro_batch(t);
  window_.samples += static_cast<double>(batch.size);
  cursor_ = sampler_->next(cursor_);
  return batch.size;
}

// --cuda-graph on: what a captured step would repeat wrongly is refused at
// start-up, on every rank (the flags agree), before any step.
void Trainer::check_cuda_graph() const {
  if (cfg_.cuda_graph != "on") return;
  RT_CHECK(!model_->draws_dropout_masks(),
           "--cuda-graph on: model {} draws dropout masks, whose keys change with every step (a "
           "graph would repeat one step's masks); train it with its dropout at 0, or with "
           "--cuda-graph off",
           spec_->describe());
  const std::string added = model_->layer_type_unsafe_in_cuda_graph();
  RT_CHECK(added.empty(),
           "--cuda-graph on: layer type {} does not declare that a CUDA graph may repeat its "
           "steps (LayerType::cuda_graph); use --cuda-graph off",
           added);
  RT_CHECK(!batch_mix_spec_.any(),
           "--cuda-graph on: --augment {} mixes each batch with new draws every step; use "
           "--cuda-graph off",
           batch_mix_spec_.describe());
  RT_CHECK(!loss_scaling(),
           "--cuda-graph on: fp16's loss scale changes with overflows and scales the gradients "
           "inside the graph; use --precision bf16, or --cuda-graph off");
  RT_CHECK(!cfg_.sync_bn,
           "--cuda-graph on: --sync-bn sums BatchNorm's statistics over the ranks inside the "
           "forward and backward, which a graph cannot hold; use --cuda-graph off");
  RT_CHECK(device_.is_cuda(), "--cuda-graph on: a CUDA graph needs a GPU (--device cuda)");
}

// The graph for this micro-batch: found, or captured now, or null (run it
// eagerly). Each (samples, accumulate) runs eagerly once first, which makes
// the plans, cuDNN engines and workspaces that a capture must find (a capture
// that would allocate or wait fails). The prefetcher cycles through a few
// device slots, so a handful of graphs cover a run; a key beyond kMaxGraphs
// (more distinct batch sizes than expected) runs eagerly.
Trainer::CapturedStep* Trainer::captured_step(const float* x, const Batch& batch, bool accumulate,
                                              float grad_scale) {
  // An empty micro-batch only zeroes (or keeps) the gradients: nothing to
  // save by a graph.
  if (cfg_.cuda_graph != "on" || capture_failed_ || faults_ != nullptr || batch.size == 0)
    return nullptr;
  // A graph replays the addresses it captured: where a workspace or scratch
  // was replaced since, every graph is captured again.
  if (const std::uint64_t g = detail::graph_buffers_generation(); g != captured_generation_) {
    captured_.clear();
    captured_full_noted_ = false;
    captured_generation_ = g;
  }
  const void* y = batch.y.ptr;
  for (CapturedStep& c : captured_)
    if (c.x == x && c.y == y && c.accumulate == accumulate && c.samples == batch.size &&
        c.grad_scale == grad_scale)
      return &c;
  const std::pair<std::size_t, bool> shape{batch.size, accumulate};
  if (std::find(warmed_.begin(), warmed_.end(), shape) == warmed_.end() || !backward_order_known_) {
    warmed_.push_back(shape);
    return nullptr;
  }
  constexpr std::size_t kMaxGraphs = 16;
  if (captured_.size() >= kMaxGraphs) {
    if (!captured_full_noted_)
      log0("--cuda-graph: {} graphs captured; other input slots and batch sizes run eagerly",
           kMaxGraphs);
    captured_full_noted_ = true;
    return nullptr;
  }
  CapturedStep c;
  c.x = x;
  c.y = y;
  c.accumulate = accumulate;
  c.samples = batch.size;
  c.grad_scale = grad_scale;
  c.graph = std::make_unique<detail::StreamGraph>();
  Model& model = *model_;
  try {
    c.graph->capture(
        model.compute_stream(),
        [&] {
          model.forward_accumulate_fused_loss(x, batch.y.as<const std::int32_t>(), batch.size,
                                              grad_scale);
          model.backward(grad_scale, accumulate);
        },
        fmt::format("the forward and backward of {} samples{}", batch.size,
                    accumulate ? " (accumulating)" : ""));
  } catch (const Error& e) {
    // Nothing of a failed capture ran, and the eager step computes the
    // forward and backward afresh: the run goes on without graphs, said
    // once, rather than ending on an optimisation.
    log_warn("--cuda-graph: capture failed, every step runs eagerly from now on: {}", e.what());
    capture_failed_ = true;
    return nullptr;
  }
  captured_.push_back(std::move(c));
  return &captured_.back();
}

// The update, unless the --nonfinite guard rejects the step. A skipped step
// leaves the parameters and the optimizer state as they were (on a GPU the
// update is issued and is a no-op on the device); its loss is rolled back,
// and its samples leave the window when it is reported.
void Trainer::update(float lr, float loss_scale, std::uint64_t step_samples, StepTiming& timing) {
  Model& model = *model_;
  // (Under ZeRO-1 a stand-in past the buffer's end: no element to name.)
  const BufferView averaged = averaged_gradients();
  const std::size_t averaged_offset = zero_ != nullptr ? model.param_count() : 0;
  if (!nonfinite_->admit(step_ + 1, averaged, step_samples, model.compute_stream(), averaged_offset,
                         sync_->average_is_local()))
    return;
  // fp16: the gradients are loss_scale times too large until divided here;
  // clipping them at loss_scale times the norm first is the same clip.
  if (cfg_.clip_norm > 0) timing.grad_norm = clip_gradients(loss_scale);
  if (loss_scale != 1.0f)
    scale_buffer(zero_ != nullptr ? zero_->shard_gradients() : grads_, 1.0f / loss_scale,
                 model.compute_stream());
  optimizer_->step(model.params(), grads_, lr);
}

// What the --nonfinite guard checks after the reduction: the averaged
// gradients; under ZeRO-1, where each rank holds only its shard of them, a
// stand-in that is NaN unless the sum of squares over all shards is finite
// (summed per shard and all-reduced: the clip needs that norm anyway), so
// every rank takes the same decision.
BufferView Trainer::averaged_gradients() {
  if (zero_ == nullptr) return grads_;
  clipper_->sum_squares(zero_->shard_gradients(), model_->compute_stream());
  sum_over_ranks(clipper_->sum_view());
  return clipper_->finite_probe(model_->compute_stream());
}

// --clip-norm with the factor computed where the gradients are (no host sync
// on a GPU). Returns the norm before clipping on the CPU, -1 on a GPU (reading
// it would cost a host sync every step).
double Trainer::clip_gradients(float loss_scale) {
  void* stream = model_->compute_stream();
  const BufferView grads = zero_ != nullptr ? zero_->shard_gradients() : grads_;
  if (zero_ == nullptr) clipper_->sum_squares(grads, stream);
  clipper_->clip(grads, cfg_.clip_norm * loss_scale, stream);
  return device_.is_cuda() ? -1.0 : clipper_->norm() / loss_scale;
}

// value += every other rank's, ordered on the compute stream (no host wait
// on a GPU with NCCL).
void Trainer::sum_over_ranks(BufferView value) {
  if (topo_.world_size() == 1) return;
  comm_->order_after(OrderingPoint::record(device_, model_->compute_stream()));
  CommRequest request = comm_->allreduce_async(value, value, ReduceOp::sum);
  const OrderingPoint done = request.completion();
  if (done.empty())
    request.wait();
  else
    done.order_stream(model_->compute_stream());
}

// Every rank agrees to stop at the same step (Slurm signals every task, but not
// at the same instant), without a blocking round trip per step: the flag sent
// after step s is read after step s+1, when it has long arrived, and all ranks
// take the same decision there.
bool Trainer::stop_agreed() {
  bool stop = false;
  if (stop_in_flight_) {
    stop_request_.wait();
    stop_in_flight_ = false;
    stop = stop_flag_ != 0;
  }
  if (!stop && step_ < total_steps_) {
    // The signal's number travels as the flag, so every rank names the real
    // signal (the highest number, if ranks got different ones).
    stop_flag_ = stop_requested() ? std::max(stop_signal_number(), 1) : 0;
    BufferView flag{&stop_flag_, 1, DType::i32, Device::cpu()};
    stop_request_ = control_->allreduce_async(flag, flag, ReduceOp::max);
    stop_in_flight_ = true;
  }
  return stop;
}

void Trainer::log_step(StepOutcome& outcome) {
  // The loss totals live on the device: reading them is this step's one host sync.
  const std::uint64_t syncs_before = host_sync::count();
  const double read_from = monotonic_seconds();
  window_.loss_sum = model_->take_loss_totals().loss_sum;
  // On a GPU the steps' host time ends before their device work: the host
  // runs up to the prefetch depth ahead, and this read waits for the rest.
  // That wait is the window's too, else its rate reads high (by up to the
  // depth's steps in a window of --log-every).
  const double drained_s = monotonic_seconds() - read_from;
  run_seconds_ += drained_s;
  outcome.timing.host_syncs += host_sync::count() - syncs_before;
  // The loss read synchronised with the device: the guard's state is current
  // (on a GPU, this is where a bad step is reported or the run stops). An
  // explosion comes before the NaN it turns into: it is named first.
  report_divergence();
  nonfinite_->report();
  window_.samples -= static_cast<double>(nonfinite_->take_skipped_samples());
  outcome.timing.skipped_steps = nonfinite_->skipped();
  if (loss_scaling()) {
    const kernels::LossScalerState s = nonfinite_->loss_scaler(/*current=*/false);
    outcome.timing.loss_scale = s.scale;
    outcome.timing.overflow_steps = s.overflows;
  }
  outcome.timing.host_syncs_between_logs = host_syncs_between_logs_;
  host_syncs_between_logs_ = 0;
  static_assert(sizeof(LossWindow) == 2 * sizeof(double));
  BufferView wire{&window_, 2, DType::f64, Device::cpu()};
  control_->allreduce(wire, wire, ReduceOp::sum);
  // Per token for a language model (training windows are full: no ignored labels).
  const double rows = static_cast<double>(model_->rows_per_sample());
  const double loss = window_.samples > 0 ? window_.loss_sum / (window_.samples * rows) : 0.0;
  StepWindow w;
  w.steps = window_step_s_.size();
  double seconds = drained_s;
  for (double s : window_step_s_) seconds += s;
  w.step_s_mean = w.steps > 0 ? seconds / static_cast<double>(w.steps) : 0.0;
  w.step_s_median = median(window_step_s_);
  w.samples_per_s = seconds > 0 ? window_.samples / seconds : 0.0;
  if (model_->rows_per_sample() > 1) w.tokens_per_s = w.samples_per_s * rows;
  w.exposed_comm_s_mean = w.steps > 0 ? window_exposed_s_ / static_cast<double>(w.steps) : 0.0;
  recorder_->on_step(step_, outcome.epoch, outcome.lr, loss, outcome.timing, w);
  // Every rank holds the same summed loss: all warn or stop alike.
  if (const auto diverging = divergence_.observe(step_, loss)) {
    if (cfg_.on_divergence == "stop")
      throw Error(fmt::format("{}; stopping (--on-divergence stop)", *diverging));
    if (topo_.rank() == 0) log_warn("{}", *diverging);
  }
  window_ = {};
  window_step_s_.clear();
  window_exposed_s_ = 0;
}

// --on-divergence on every step's loss: the device watches each step's loss
// as the --nonfinite decision takes it (kernels/step_divergence.cuh), with no
// host sync; here, where the host has just synchronised, the ranks agree on
// the first diverging step any of them saw (two small messages; a third only
// when there is one), and all warn once or stop alike. Call on every rank at
// the same point.
void Trainer::report_divergence() {
  const kernels::StepDivergence d = nonfinite_->step_divergence();
  constexpr double kNone = std::numeric_limits<double>::infinity();
  double first = d.first_step != 0 ? static_cast<double>(d.first_step) : kNone;
  control_->allreduce(view_of(&first, 1), view_of(&first, 1), ReduceOp::min);
  if (first == kNone || first <= static_cast<double>(divergence_reported_step_)) return;
  // That step's numbers, from the lowest rank that saw it.
  const bool mine = d.first_step != 0 && static_cast<double>(d.first_step) == first;
  double seen[3] = {mine ? -static_cast<double>(topo_.rank()) : -kNone,
                    mine ? d.first_loss : -kNone, mine ? d.first_mean : -kNone};
  control_->allreduce(view_of(seen, 3), view_of(seen, 3), ReduceOp::max);
  divergence_reported_step_ = static_cast<std::uint64_t>(first);
  const std::string message = fmt::format(
      "loss diverging at step {}: rank {}'s loss {:.4g} per sample is {:.3g}x the running mean "
      "{:.4g} of its steps before (every step's loss is checked on the device; lower --lr, add "
      "--warmup or --clip-norm)",
      divergence_reported_step_, static_cast<int>(-seen[0]), seen[1],
      seen[2] > 0 ? seen[1] / seen[2] : kNone, seen[2]);
  if (cfg_.on_divergence == "stop")
    throw Error(fmt::format("{}; stopping (--on-divergence stop)", message));
  if (topo_.rank() == 0) log_warn("{}", message);
}

bool Trainer::after_step(StepOutcome& outcome) {
  flight::enter_phase("after-step", step_);
  stragglers_->add(outcome.timing);
  window_step_s_.push_back(outcome.timing.total);
  window_exposed_s_ += outcome.timing.exposed_comm;
  const std::uint64_t warmup_steps = cfg_.log_every > 0 ? cfg_.log_every : 1;
  if (++run_steps_ > warmup_steps && measured_step_s_.size() < (std::size_t{1} << 20))
    measured_step_s_.push_back(outcome.timing.total);
  if (const auto report = stragglers_->maybe_report(step_, *control_))
    recorder_->on_stragglers(*report);
  const bool stop = stop_agreed();
  const bool last = step_ == total_steps_;
  if (cfg_.log_every > 0 && (step_ % cfg_.log_every == 0 || last || stop))
    log_step(outcome);
  else
    host_syncs_between_logs_ += outcome.timing.host_syncs;
  const bool epoch_end = cursor_.epoch != outcome.epoch;
  if (((cfg_.eval_every > 0 && step_ % cfg_.eval_every == 0) || epoch_end || last) && evaluates()) {
    last_eval_ = evaluate_now();
    have_eval_ = true;
  }
  if (faults_) faults_->after_step(step_);
  if (cfg_.check_every > 0 && (step_ % cfg_.check_every == 0 || last)) {
    nonfinite_->sync_and_report();
    average_buffers();
    BufferView params = model_->params();
    std::vector<float> host(params.count + model_->buffer_count());
    // The copies wait for the device (a counted host sync).
    copy_view(view_of(host.data(), params.count), params);
    if (model_->buffer_count() > 0)
      copy_view(view_of(host.data() + params.count, model_->buffer_count()), model_->buffers());
    check_replicas(*control_, hash_bytes(host.data(), host.size() * sizeof(float)), step_);
  }
  if (stop) {
    log0("stop requested ({}): stopping after step {}", stop_reason(stop_flag_), step_);
    summary_.last_checkpoint = checkpoint(/*finished=*/false);
    summary_.stopped_by_signal = true;
    return false;
  }
  if (last) {
    summary_.last_checkpoint = checkpoint(/*finished=*/true);
  } else if (cfg_.ckpt_every > 0 && step_ % cfg_.ckpt_every == 0) {
    summary_.last_checkpoint = checkpoint(/*finished=*/false);
  }
  return !last;
}

std::string Trainer::checkpoint(bool finished) {
  if (cfg_.ckpt_dir.empty()) return {};
  // Never a checkpoint from a state after a bad step: on a GPU the host learns
  // of one here at the latest (the run stops with its message); nor, under
  // --on-divergence stop, after a diverging one.
  nonfinite_->sync();
  report_divergence();
  nonfinite_->report();
  flight::enter_phase("checkpoint", step_);
  average_buffers();
  // ZeRO-1: the whole state, gathered from every rank's shard, is saved.
  if (zero_ != nullptr) zero_->gather_state();
  std::string path;
  if (topo_.rank() == 0) {
    RunPosition position;
    position.step = step_;
    position.next_cursor = cursor_;
    position.global_batch = global_batch_;
    position.sampler_global_batch = sampler_global_batch_;
    position.world_size = topo_.world_size();
    position.finished = finished;
    position.input_json = image_input_record(*train_data_);
    if (loss_scaling()) {
      const kernels::LossScalerState s = nonfinite_->loss_scaler(/*current=*/false);
      position.loss_scale = {s.scale, s.growth_tracker, s.overflows};
    }
    path = save_training_state(cfg_, *spec_, *model_, *optimizer_, position);
    recorder_->on_checkpoint(step_, path);
  }
  if (zero_ != nullptr) zero_->release_full_state();
  // Nobody runs ahead of an unfinished checkpoint: a crash then loses at most
  // the steps since the previous one.
  control_->barrier();
  return path;
}

// Ranks that normalise their own micro-batches (BatchNorm without --sync-bn)
// drift apart in their running statistics: they are averaged over the ranks
// before every evaluation, replica check and checkpoint, so that what is
// evaluated or saved is the same on every rank, whichever rank writes it.
void Trainer::average_buffers() {
  if (model_->buffer_count() == 0 || topo_.world_size() == 1) return;
  // The statistics were written on the compute stream: the backend waits for it.
  comm_->order_after(OrderingPoint::record(device_, model_->compute_stream()));
  comm_->allreduce(model_->buffers(), model_->buffers(), ReduceOp::avg);
}

EvalResult Trainer::evaluate_now() {
  nonfinite_->sync_and_report();
  average_buffers();
  flight::enter_phase("eval", step_);
  const double t0 = monotonic_seconds();
  EvalResult r = evaluate(*model_, *eval_data_, *control_, model_->max_batch(), device_);
  recorder_->on_eval(step_, r, monotonic_seconds() - t0);
  return r;
}

void Trainer::phase(std::string_view name) {
  flight::enter_phase(name, step_ + 1);
  if (faults_) faults_->at_phase(name, step_ + 1);
}

TrainSummary Trainer::run() {
  while (step_ < total_steps_) {
    StepOutcome outcome = step();
    if (!after_step(outcome)) break;
  }
  if (stop_in_flight_) stop_request_.wait();
  nonfinite_->sync();
  report_divergence();
  nonfinite_->report();
  if (!have_eval_ && evaluates()) last_eval_ = evaluate_now();
  summary_.steps = step_;
  summary_.epochs = static_cast<double>(step_ * cfg_.accum) / static_cast<double>(micro_per_epoch_);
  summary_.test_accuracy = last_eval_.accuracy;
  summary_.test_loss = last_eval_.loss;
  summary_.test_n = last_eval_.n;
  summary_.samples_per_second =
      run_seconds_ > 0 ? static_cast<double>(run_samples_) / run_seconds_ : 0;
  summary_.test_tokens = last_eval_.tokens;
  summary_.test_perplexity = last_eval_.perplexity;
  if (model_->rows_per_sample() > 1)
    summary_.tokens_per_second =
        summary_.samples_per_second * static_cast<double>(model_->rows_per_sample());
  summary_.step_s_median = median(measured_step_s_);
  summary_.median_steps = measured_step_s_.size();
  recorder_->finish(*control_, summary_);
  flight::enter_phase("done", step_);
  flight::stop();
  return summary_;
}

}  // namespace

TrainSummary train(const TrainConfig& cfg, const Topology& topo) {
  return Trainer(cfg, topo).run();
}

}  // namespace ringtrain
