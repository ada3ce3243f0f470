#include "ringtrain/train/training_state.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/tensor/device_memory.h"
#include "ringtrain/train/checkpoint.h"

namespace ringtrain {

namespace {

// The host copy of a device buffer (a view of it on the CPU).
std::vector<float> to_host(BufferView v) {
  std::vector<float> host(v.count);
  copy_view(view_of(host.data(), host.size()), v);
  return host;
}

// What rank 0 tells every rank about the checkpoint it found.
struct ResumeMessage {
  std::uint64_t found = 0;
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  std::uint64_t epoch_step = 0;
  std::uint64_t old_sampler_global_batch = 0;  // the cursor's unit when it was saved
  double loss_scale = 0;
  std::uint64_t loss_scale_growth_tracker = 0;
  std::uint64_t loss_scale_overflows = 0;
};

}  // namespace

std::string save_training_state(const TrainConfig& cfg, const ModelSpec& spec, Model& model,
                                Optimizer& optimizer, const RunPosition& position) {
  const std::vector<float> params = to_host(model.params());
  std::vector<TensorRecord> param_records;
  for (const ParamInfo& p : model.param_info())
    param_records.push_back({p.name, p.shape, params.data() + p.offset, p.count});
  auto state = optimizer.state();
  std::vector<std::vector<float>> state_host;
  std::vector<TensorRecord> state_records;
  for (auto& s : state) state_host.push_back(to_host(s.view));
  const std::vector<float> buffers = to_host(model.buffers());
  std::vector<TensorRecord> buffer_records;
  for (const ParamInfo& b : model.buffer_info())
    buffer_records.push_back({b.name, b.shape, buffers.data() + b.offset, b.count});
  for (std::size_t i = 0; i < state.size(); ++i)
    state_records.push_back(
        {state[i].name, {state[i].view.count}, state_host[i].data(), state_host[i].size()});
  CheckpointMeta meta;
  meta.step = position.step;
  meta.epoch = position.next_cursor.epoch;
  meta.epoch_step = position.next_cursor.step;
  meta.global_batch = position.global_batch;
  meta.world_size = position.world_size;
  meta.rng_state = {cfg.seed};  // dropout and sampling derive from (seed, rank, step, epoch)
  meta.model_spec = spec.to_string();
  meta.model_hash = spec.hash();
  auto cfg_json = nlohmann::json::parse(cfg.to_json());
  cfg_json["sampler_global_batch"] = position.sampler_global_batch;
  cfg_json["world_size"] = position.world_size;
  if (position.loss_scale.scale > 0)
    cfg_json["loss_scaler"] = {{"scale", position.loss_scale.scale},
                               {"growth_tracker", position.loss_scale.growth_tracker},
                               {"overflows", position.loss_scale.overflows}};
  if (!position.input_json.empty()) cfg_json["input"] = nlohmann::json::parse(position.input_json);
  meta.config_json = cfg_json.dump();
  meta.finished = position.finished;
  return write_checkpoint_atomic(cfg.ckpt_dir, meta, param_records, state_records, cfg.keep,
                                 buffer_records);
}

ResumePoint resume_training_state(const TrainConfig& cfg, Communicator& control,
                                  const ModelSpec& spec, Model& model, Optimizer& optimizer,
                                  std::size_t sampler_global_batch) {
  ResumeMessage message;
  std::string path;
  if (control.rank() == 0) {
    std::optional<LoadedCheckpoint> found;
    if (cfg.resume == "latest") {
      // A damaged newest file falls back to the one before; a readable file of
      // another model or shape is still refused below.
      std::vector<SkippedCheckpoint> skipped;
      found = read_newest_intact_checkpoint(cfg.ckpt_dir, &skipped);
      for (const auto& s : skipped)
        log_warn("resume: skipping {}, it cannot be read: {}", s.path, s.reason);
      if (found && !skipped.empty())
        log_warn("resume: falling back to {}, the newest checkpoint that reads", found->path);
    } else {
      found = read_checkpoint(cfg.resume);
    }
    if (found) {
      LoadedCheckpoint& ck = *found;
      path = ck.path;
      CheckpointExpectation expect;
      expect.model_hash = spec.hash();
      expect.model_spec = spec.to_string();
      for (const auto& p : model.param_info()) expect.params.push_back({p.name, p.shape});
      for (const auto& b : model.buffer_info()) expect.buffers.push_back({b.name, b.shape});
      std::vector<TensorSpec> opt;
      for (const auto& s : optimizer.state()) opt.push_back({s.name, {s.view.count}});
      expect.optimizer = opt;
      validate_checkpoint(ck, expect);
      BufferView params = model.params();
      for (std::size_t i = 0; i < ck.params.size(); ++i) {
        const ParamInfo& info = model.param_info()[i];
        copy_view(params.slice(info.offset, info.count),
                  view_of(ck.params[i].second.data(), info.count));
      }
      BufferView buffers = model.buffers();
      for (std::size_t i = 0; i < ck.buffers.size(); ++i) {
        const ParamInfo& info = model.buffer_info()[i];
        copy_view(buffers.slice(info.offset, info.count),
                  view_of(ck.buffers[i].second.data(), info.count));
      }
      auto state = optimizer.state();
      for (std::size_t i = 0; i < ck.optimizer.size(); ++i)
        copy_view(state[i].view,
                  view_of(ck.optimizer[i].second.data(), ck.optimizer[i].second.size()));
      optimizer.set_step_count(ck.meta.step);
      std::uint64_t old_sampler_batch = sampler_global_batch;
      LossScale scale;
      try {
        const auto cfg_json = nlohmann::json::parse(ck.meta.config_json);
        old_sampler_batch = cfg_json.at("sampler_global_batch").get<std::uint64_t>();
        if (cfg_json.contains("loss_scaler")) {
          const auto& s = cfg_json.at("loss_scaler");
          scale = {s.at("scale").get<double>(), s.at("growth_tracker").get<std::uint64_t>(),
                   s.at("overflows").get<std::uint64_t>()};
        }
      } catch (const std::exception& e) {
        RT_CHECK(false,
                 "checkpoint {}: its config lacks 'sampler_global_batch' or has a bad "
                 "'loss_scaler' ({})",
                 path, e.what());
      }
      message = {
          1,           ck.meta.step,         ck.meta.epoch,  ck.meta.epoch_step, old_sampler_batch,
          scale.scale, scale.growth_tracker, scale.overflows};
    }
  }
  static_assert(sizeof(ResumeMessage) == 8 * sizeof(std::uint64_t));
  BufferView wire{&message, 8, DType::i64, Device::cpu()};
  control.broadcast(wire, wire, 0);
  ResumePoint point;
  if (message.found == 0) {
    log0("resume: no checkpoint found in {}, starting from step 0", cfg.ckpt_dir);
    return point;
  }
  point.resumed = true;
  point.step = message.step;
  point.cursor = ShardedSampler::convert_cursor(
      {message.epoch, message.epoch_step}, message.old_sampler_global_batch, sampler_global_batch);
  point.path = path;
  point.loss_scale = {message.loss_scale, message.loss_scale_growth_tracker,
                      message.loss_scale_overflows};
  return point;
}

}  // namespace ringtrain
