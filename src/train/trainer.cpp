// The step loop. One optimizer step:
//
//   for each of --accum micro-batches:
//     batch  <- prefetcher (staged on a background thread)
//     forward, loss
//     backward  --(layer k's grads final)--> bucket complete? start its async all-reduce
//   wait for every bucket (the gradient buffer now holds the average over ranks)
//   clip (after the all-reduce, so every rank clips the same vector), optimizer step
//
// Control messages (signature, stop flag, loss, eval sums, replica hashes) go
// over a separate host communicator, so the gradient backend may be NCCL.
#include "ringtrain/train/trainer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/comm/control_channel.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/prefetcher.h"
#include "ringtrain/data/sharded_sampler.h"
#include "ringtrain/dist/bucket_plan.h"
#include "ringtrain/dist/gradient_sync.h"
#include "ringtrain/dist/run_agreement.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/optim/grad_clip.h"
#include "ringtrain/optim/lr_schedule.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/tensor/device_memory.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/evaluator.h"
#include "ringtrain/train/run_recorder.h"
#include "ringtrain/train/stop_signal.h"

namespace ringtrain {

namespace {

std::uint64_t hash_string(const std::string& s) { return hash_bytes(s.data(), s.size()); }

std::uint64_t float_bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// The host copy of a device buffer (a view of it on the CPU).
std::vector<float> to_host(BufferView v) {
  std::vector<float> host(v.count);
  device_copy(host.data(), Device::cpu(), v.ptr, v.device, v.bytes());
  return host;
}

struct ResumePoint {
  std::uint64_t step = 0;
  DataCursor cursor;
  std::string path;
};

BufferView host_u64(std::vector<std::uint64_t>& v) {
  return {v.data(), v.size(), DType::i64, Device::cpu()};
}

// Rank 0 reads the checkpoint (ranks need not share a filesystem), checks it
// against this run, loads it into its model and optimizer, and tells every rank
// where training continues. The caller then broadcasts rank 0's parameters and
// optimizer state, as at a fresh start.
ResumePoint resume_on_rank0(const TrainConfig& cfg, Communicator& control, Model& model,
                            Optimizer& optimizer, const ModelSpec& spec, std::size_t sampler_global_batch) {
  ResumePoint point;
  // [found, step, epoch, epoch_step, old sampler global batch]
  std::vector<std::uint64_t> wire(5, 0);
  std::string path;
  if (control.rank() == 0) {
    if (cfg.resume == "latest") {
      if (auto latest = latest_checkpoint(cfg.ckpt_dir)) path = *latest;
    } else {
      path = cfg.resume;
    }
    if (!path.empty()) {
      CheckpointExpectation expect;
      expect.model_hash = spec.hash();
      expect.model_spec = spec.to_string();
      for (const auto& p : model.param_info()) expect.params.push_back({p.name, p.shape});
      std::vector<TensorSpec> opt;
      for (const auto& s : optimizer.state()) opt.push_back({s.name, {s.view.count}});
      expect.optimizer = opt;
      LoadedCheckpoint ck = read_checkpoint(path, expect);
      BufferView params = model.params();
      for (std::size_t i = 0; i < ck.params.size(); ++i) {
        const ParamInfo& info = model.param_info()[i];
        device_copy(static_cast<float*>(params.ptr) + info.offset, params.device, ck.params[i].second.data(),
                    Device::cpu(), info.count * sizeof(float));
      }
      auto state = optimizer.state();
      for (std::size_t i = 0; i < ck.optimizer.size(); ++i)
        device_copy(state[i].view.ptr, state[i].view.device, ck.optimizer[i].second.data(), Device::cpu(),
                    state[i].view.bytes());
      optimizer.set_step_count(ck.meta.step);
      std::uint64_t old_sampler_batch = sampler_global_batch;
      try {
        const auto cfg_json = nlohmann::json::parse(ck.meta.config_json);
        old_sampler_batch = cfg_json.at("sampler_global_batch").get<std::uint64_t>();
      } catch (const std::exception& e) {
        RT_CHECK(false, "checkpoint {}: its config lacks 'sampler_global_batch' ({})", path, e.what());
      }
      wire = {1, ck.meta.step, ck.meta.epoch, ck.meta.epoch_step, old_sampler_batch};
    }
  }
  control.broadcast(host_u64(wire), host_u64(wire), 0);
  if (wire[0] == 0) {
    log0("resume: no checkpoint found in {}, starting from step 0", cfg.ckpt_dir);
    return point;
  }
  point.step = wire[1];
  point.cursor = ShardedSampler::convert_cursor({wire[2], wire[3]}, wire[4], sampler_global_batch);
  point.path = path;
  return point;
}

}  // namespace

TrainSummary train(const TrainConfig& cfg, const Topology& topo) {
  cfg.validate();
  const Device device = topo.device();
  CommOptions comm_options;
  comm_options.timeout_seconds = cfg.timeout;
  // The control channel: small host messages, always over MPI.
  std::unique_ptr<Communicator> control = make_control_communicator(topo, comm_options);

  // ---- data and model ------------------------------------------------------
  Dataset train_data = Dataset::open_on_all_ranks(cfg.data_path, cfg.split);
  Dataset eval_data = Dataset::open_on_all_ranks(cfg.data_path, cfg.eval_split);
  RT_CHECK(eval_data.sample_shape() == train_data.sample_shape(),
           "{}: sample shape {} differs from {}'s {}", eval_data.describe(),
           shape_string(eval_data.sample_shape()), train_data.describe(), shape_string(train_data.sample_shape()));
  if (cfg.cache) {
    train_data.enable_cache(0, topo.local_size());
    eval_data.enable_cache(0, topo.local_size());
  }
  const ModelSpec spec = ModelSpec::parse(cfg.model);
  ModelOptions model_options;
  model_options.device = device;
  model_options.seed = cfg.seed;
  model_options.max_batch = cfg.batch;
  model_options.tf32 = parse_tf32_mode(cfg.tf32);
  std::unique_ptr<Model> model =
      Model::build(spec, train_data.sample_shape(), train_data.num_classes(), model_options);

  // ---- start-up agreement --------------------------------------------------
  const std::size_t world = static_cast<std::size_t>(topo.world_size());
  ShardedSampler sampler(train_data.size(), cfg.batch, topo.rank(), topo.world_size(), cfg.seed);
  const std::size_t sampler_global_batch = sampler.global_batch();
  const std::size_t global_batch = sampler_global_batch * cfg.accum;
  agree_on_signature(
      *control,
      {{"model spec hash", spec.hash()},
       {"parameter count", model->param_count()},
       {"parameter dtype", static_cast<std::uint64_t>(DType::f32)},
       {"dataset sample shape", hash_string(shape_string(train_data.sample_shape()))},
       {"dataset classes", static_cast<std::uint64_t>(train_data.num_classes())},
       {"dataset train samples", train_data.size()},
       {"dataset eval samples", eval_data.size()},
       {"batch", cfg.batch},
       {"accum", cfg.accum},
       {"seed", cfg.seed},
       {"lr", float_bits(cfg.lr)},
       {"optimizer", hash_string(cfg.optimizer.kind)},
       {"backend", hash_string(cfg.backend)},
       {"bucket cap", float_bits(static_cast<float>(cfg.bucket_mb))},
       {"overlap", cfg.overlap ? 1u : 0u}});

  // Only after the ranks agree: the backend's collective set-up (the shm window
  // sized by the parameter count) would otherwise fail less clearly.
  std::unique_ptr<Communicator> comm = make_communicator(cfg.backend, topo, comm_options);
  // The gradients live where the backend reduces best (the shm window: no copy).
  BufferView grads = comm->allocate(model->param_count(), DType::f32);
  model->bind_gradient_buffer(grads);

  // ---- optimizer and schedule ---------------------------------------------
  std::unique_ptr<Optimizer> optimizer = make_optimizer(cfg.optimizer, model->param_count(), device);
  const std::size_t micro_per_epoch = sampler.steps_per_epoch();
  std::uint64_t total_steps = static_cast<std::uint64_t>(cfg.epochs) * micro_per_epoch / cfg.accum;
  if (cfg.max_steps > 0) total_steps = cfg.epochs > 0 ? std::min(total_steps, cfg.max_steps) : cfg.max_steps;
  RT_CHECK(total_steps > 0,
           "nothing to train: {} epoch(s) of {} global batches of {} make 0 optimizer steps with --accum {}",
           cfg.epochs, micro_per_epoch, sampler_global_batch, cfg.accum);
  float base_lr = cfg.lr;
  if (cfg.lr_scaling == "linear") {
    const std::size_t reference = cfg.reference_batch ? cfg.reference_batch : cfg.batch;
    base_lr = linear_scaled_lr(cfg.lr, global_batch, reference);
  }
  LrScheduleConfig schedule_config;
  schedule_config.kind = cfg.schedule;
  schedule_config.base_lr = base_lr;
  schedule_config.warmup_steps = cfg.warmup;
  schedule_config.total_steps = total_steps;
  schedule_config.step_size = cfg.step_size;
  schedule_config.gamma = cfg.gamma;
  const LrSchedule schedule(schedule_config);

  // ---- resume, then make every replica rank 0's ------------------------------
  ResumePoint start;
  if (cfg.resume.empty() && !cfg.ckpt_dir.empty() && topo.rank() == 0) {
    // A fresh run must not mix its checkpoints with an earlier run's: resume
    // latest would later pick whichever has the higher step.
    const auto existing = latest_checkpoint(cfg.ckpt_dir);
    RT_CHECK(!existing, "--ckpt-dir {} already holds checkpoints of another run (newest: {}): pass --resume "
             "latest to continue it, or choose an empty directory", cfg.ckpt_dir, existing.value_or(""));
  }
  if (!cfg.resume.empty()) start = resume_on_rank0(cfg, *control, *model, *optimizer, spec, sampler_global_batch);
  comm->broadcast(model->params(), model->params(), 0);
  for (auto& s : optimizer->state()) comm->broadcast(s.view, s.view, 0);
  optimizer->set_step_count(start.step);
  RT_CHECK(start.step <= total_steps, "checkpoint {} is at step {}, past the {} steps this run asks for",
           start.path, start.step, total_steps);

  BucketPlan plan = [&] {
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (std::size_t l = 0; l < model->layer_count(); ++l) {
      const auto [begin, end] = model->layer_param_range(l);  // [begin, end)
      ranges.emplace_back(begin, end - begin);
    }
    return BucketPlan(ranges, sizeof(float), static_cast<std::size_t>(cfg.bucket_mb * 1024.0 * 1024.0));
  }();
  const std::size_t bucket_count = plan.buckets().size();
  // On a GPU a bucket's gradients are final once the model's stream has run
  // the kernels queued for it (see GradientSynchronizer).
  std::function<void()> before_launch;
  if (device.is_cuda()) before_launch = [&model] { model->synchronize(); };
  GradientSynchronizer sync(*comm, std::move(plan), grads, cfg.overlap, before_launch);

  log0("ringtrain train: {} rank(s) on {} node(s), backend {}, device {}", topo.world_size(), topo.node_count(),
       comm->name(), device_name(device));
  log0("  model {} ({} parameters, hash {:016x}), data {} ({} samples, shape {}, {} classes)", spec.to_string(),
       model->param_count(), spec.hash(), train_data.describe(), train_data.size(),
       shape_string(train_data.sample_shape()), train_data.num_classes());
  log0("  global batch {} = {} per rank x {} rank(s) x {} accumulation step(s); effective lr {:g}{}",
       global_batch, cfg.batch, world, cfg.accum, base_lr,
       cfg.lr_scaling == "linear" ? fmt::format(" (linear scaling of {:g}, warmup {} steps)", cfg.lr, cfg.warmup)
                                  : std::string());
  log0("  {} optimizer steps ({} per epoch), {} gradient bucket(s) of at most {:g} MiB, overlap {}",
       total_steps, micro_per_epoch / cfg.accum, bucket_count, cfg.bucket_mb, cfg.overlap ? "on" : "off");
  if (!start.path.empty())
    log0("  resumed from {} at step {} (epoch {}, step {} of the epoch)", start.path, start.step,
         start.cursor.epoch, start.cursor.step);

  RunRecorder recorder(cfg, topo, total_steps,
                       start.path.empty() ? std::nullopt : std::optional<std::uint64_t>(start.step));
  StopSignalHandler stop_handler;
  Prefetcher prefetcher(train_data, sampler, start.cursor, cfg.prefetch_depth, device);

  auto write_checkpoint = [&](std::uint64_t step, DataCursor next_cursor, bool finished) -> std::string {
    if (cfg.ckpt_dir.empty()) return {};
    std::string path;
    if (topo.rank() == 0) {
      const std::vector<float> params = to_host(model->params());
      std::vector<TensorRecord> param_records;
      for (const ParamInfo& p : model->param_info())
        param_records.push_back({p.name, p.shape, params.data() + p.offset, p.count});
      std::vector<std::vector<float>> state_host;
      std::vector<TensorRecord> state_records;
      for (auto& s : optimizer->state()) state_host.push_back(to_host(s.view));
      auto state = optimizer->state();
      for (std::size_t i = 0; i < state.size(); ++i)
        state_records.push_back({state[i].name, {state[i].view.count}, state_host[i].data(), state_host[i].size()});
      CheckpointMeta meta;
      meta.step = step;
      meta.epoch = next_cursor.epoch;
      meta.epoch_step = next_cursor.step;
      meta.global_batch = global_batch;
      meta.world_size = topo.world_size();
      meta.rng_state = {cfg.seed};  // dropout and sampling derive from (seed, rank, step, epoch)
      meta.model_spec = spec.to_string();
      meta.model_hash = spec.hash();
      auto cfg_json = nlohmann::json::parse(cfg.to_json());
      cfg_json["sampler_global_batch"] = sampler_global_batch;
      cfg_json["world_size"] = topo.world_size();
      meta.config_json = cfg_json.dump();
      meta.finished = finished;
      path = write_checkpoint_atomic(cfg.ckpt_dir, meta, param_records, state_records, cfg.keep);
      recorder.on_checkpoint(step, path);
    }
    // Nobody runs ahead of an unfinished checkpoint: a crash then loses at most
    // the steps since the previous one.
    control->barrier();
    return path;
  };

  auto run_eval = [&](std::uint64_t step) {
    const double t0 = monotonic_seconds();
    EvalResult r = evaluate(*model, eval_data, *control, cfg.batch, device);
    recorder.on_eval(step, r, monotonic_seconds() - t0);
    return r;
  };

  // ---- the loop ------------------------------------------------------------
  TrainSummary summary;
  DataCursor cursor = sampler.normalize(start.cursor);
  std::uint64_t step = start.step;
  double run_seconds = 0;
  std::uint64_t run_samples = 0;
  std::vector<double> window(2, 0.0);  // loss sum, samples since the last log line
  std::int32_t stop_flag = 0;
  EvalResult last_eval;
  bool have_eval = false;
  const BufferView params = model->params();
  // RINGTRAIN_FAULT_DIVERGE_RANK=r perturbs rank r's parameters after step 1, so
  // tests can check that --check-every catches diverged replicas.
  const char* diverge_env = std::getenv("RINGTRAIN_FAULT_DIVERGE_RANK");
  const int diverge_rank = diverge_env ? std::atoi(diverge_env) : -1;

  while (step < total_steps) {
    StepTiming timing;
    const double step_start = monotonic_seconds();
    const std::uint64_t epoch_before = cursor.epoch;
    for (std::size_t micro = 0; micro < cfg.accum; ++micro) {
      const double t_data = monotonic_seconds();
      Batch batch = prefetcher.next();
      timing.data_wait += monotonic_seconds() - t_data;
      RT_CHECK(batch.cursor == cursor, "internal: prefetcher at epoch {} step {}, trainer at epoch {} step {}",
               batch.cursor.epoch, batch.cursor.step, cursor.epoch, cursor.step);
      model->set_dropout_context(static_cast<std::uint64_t>(topo.rank()), step * cfg.accum + micro);
      const double t_fwd = monotonic_seconds();
      Model::LossResult r = model->forward(batch.x.as<const float>(), batch.y.as<const std::int32_t>(),
                                           batch.size, /*training=*/true);
      const double t_bwd = monotonic_seconds();
      timing.forward += t_bwd - t_fwd;
      sync.begin_step(/*sync=*/micro + 1 == cfg.accum);
      model->backward(1.0f / static_cast<float>(cfg.accum), /*accumulate=*/micro > 0,
                      [&sync](std::size_t layer) { sync.on_layer_ready(layer); });
      timing.backward += monotonic_seconds() - t_bwd;
      const double t_end = monotonic_seconds();
      recorder.trace_span("forward", "compute", t_fwd, t_bwd);
      recorder.trace_span("backward", "compute", t_bwd, t_end);
      recorder.trace_span("data wait", "data", t_data, t_fwd);
      window[0] += r.loss_sum;
      window[1] += static_cast<double>(batch.size);
      cursor = sampler.next(cursor);
    }
    sync.finish();
    timing.exposed_comm = sync.exposed_seconds();
    if (!sync.timings().empty()) {
      double first = sync.timings().front().launched_s, last_done = 0;
      for (const BucketTiming& b : sync.timings()) {
        recorder.trace_span(fmt::format("allreduce bucket {}", b.bucket), "comm", b.launched_s, b.done_s);
        first = std::min(first, b.launched_s);
        last_done = std::max(last_done, b.done_s);
      }
      timing.comm_span = last_done - first;
    }

    const double t_opt = monotonic_seconds();
    if (cfg.clip_norm > 0) timing.grad_norm = clip_grad_norm(grads, cfg.clip_norm);
    const float lr = schedule.lr_at(step);
    optimizer->step(params, grads, lr);
    device_synchronize(device);
    timing.optimizer = monotonic_seconds() - t_opt;
    recorder.trace_span("optimizer", "compute", t_opt, t_opt + timing.optimizer);
    ++step;
    timing.total = monotonic_seconds() - step_start;
    run_seconds += timing.total;
    run_samples += global_batch;

    // Every rank agrees to stop at the same step (Slurm signals every task,
    // but not at the same instant).
    stop_flag = stop_requested() ? 1 : 0;
    control->allreduce(BufferView{&stop_flag, 1, DType::i32, Device::cpu()},
                       BufferView{&stop_flag, 1, DType::i32, Device::cpu()}, ReduceOp::max);

    const bool last = step == total_steps;
    if (cfg.log_every > 0 && (step % cfg.log_every == 0 || last || stop_flag)) {
      control->allreduce(BufferView{window.data(), 2, DType::f64, Device::cpu()},
                         BufferView{window.data(), 2, DType::f64, Device::cpu()}, ReduceOp::sum);
      const double loss = window[1] > 0 ? window[0] / window[1] : 0.0;
      // The epoch this step trained in (the cursor already points past it).
      recorder.on_step(step, epoch_before, lr, loss, timing, static_cast<double>(global_batch) / timing.total);
      window.assign(2, 0.0);
    }
    const bool epoch_end = cursor.epoch != epoch_before;
    if ((cfg.eval_every > 0 && step % cfg.eval_every == 0) || epoch_end || last) {
      last_eval = run_eval(step);
      have_eval = true;
    }
    if (diverge_rank == topo.rank() && step == 1) {
      // Fault injection for the replica check's own test: nudge one weight.
      float nudge = 0;
      device_copy(&nudge, Device::cpu(), params.ptr, params.device, sizeof(float));
      nudge += 1e-3f;
      device_copy(params.ptr, params.device, &nudge, Device::cpu(), sizeof(float));
    }
    if (cfg.check_every > 0 && (step % cfg.check_every == 0 || last)) {
      device_synchronize(device);
      const std::vector<float> host = to_host(params);
      check_replicas(*control, hash_bytes(host.data(), host.size() * sizeof(float)), step);
    }
    if (stop_flag) {
      log0("stop requested (SIGINT/SIGTERM): stopping after step {}", step);
      summary.last_checkpoint = write_checkpoint(step, cursor, /*finished=*/false);
      summary.stopped_by_signal = true;
      break;
    }
    if (last) {
      summary.last_checkpoint = write_checkpoint(step, cursor, /*finished=*/true);
    } else if (cfg.ckpt_every > 0 && step % cfg.ckpt_every == 0) {
      summary.last_checkpoint = write_checkpoint(step, cursor, /*finished=*/false);
    }
  }
  if (!have_eval) last_eval = run_eval(step);

  summary.steps = step;
  summary.epochs = static_cast<double>(step * cfg.accum) / static_cast<double>(micro_per_epoch);
  summary.test_accuracy = last_eval.accuracy;
  summary.test_loss = last_eval.loss;
  summary.test_n = last_eval.n;
  summary.samples_per_second = run_seconds > 0 ? static_cast<double>(run_samples) / run_seconds : 0;
  recorder.finish(*control, summary);
  return summary;
}

}  // namespace ringtrain
