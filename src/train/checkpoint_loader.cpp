#include "ringtrain/train/checkpoint_loader.h"

#include <cmath>

#include <cstring>

#include "comm/broadcast_text.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/tensor/device_memory.h"

namespace ringtrain {

namespace {

BufferView host_i64(std::vector<std::uint64_t>& v) {
  return {v.data(), v.size(), DType::i64, Device::cpu()};
}

// Rank 0's verdict on each phase, so every rank throws together.
void share_verdict(Communicator& control, const std::string& error_on_root) {
  const std::string message = broadcast_text(control, error_on_root, 0);
  if (message.empty()) return;
  throw Error(control.rank() == 0 ? message : message + " (reported by rank 0)");
}

}  // namespace

CheckpointModel load_checkpoint_model(const std::string& path, Communicator& control,
                                      const std::vector<std::size_t>& input_shape, int num_classes,
                                      const ModelOptions& options) {
  LoadedCheckpoint ck;
  std::string error;
  if (control.rank() == 0) {
    try {
      ck = read_checkpoint(path);
      // A model with NaN or Inf parameters predicts nothing meaningful.
      for (const auto& [name, values] : ck.params)
        for (float v : values)
          RT_CHECK(std::isfinite(v),
                   "checkpoint {}: parameter tensor '{}' holds non-finite values (NaN or Inf); "
                   "refusing to use it",
                   path, name);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  share_verdict(control, error);

  CheckpointModel out;
  out.path = path;
  // Metadata every rank needs: [step, epoch, epoch_step, global_batch, world, hash, finished]
  std::vector<std::uint64_t> meta{ck.meta.step,
                                  ck.meta.epoch,
                                  ck.meta.epoch_step,
                                  ck.meta.global_batch,
                                  static_cast<std::uint64_t>(ck.meta.world_size),
                                  ck.meta.model_hash,
                                  ck.meta.finished ? 1u : 0u};
  control.broadcast(host_i64(meta), host_i64(meta), 0);
  out.meta.step = meta[0];
  out.meta.epoch = meta[1];
  out.meta.epoch_step = meta[2];
  out.meta.global_batch = meta[3];
  out.meta.world_size = static_cast<int>(meta[4]);
  out.meta.model_hash = meta[5];
  out.meta.finished = meta[6] != 0;
  out.meta.model_spec = broadcast_text(control, ck.meta.model_spec, 0);

  // Every rank builds the model the checkpoint describes; whether it fits this
  // data, and whether the file's tensors fit the model, is decided on rank 0.
  std::unique_ptr<Model> model;
  try {
    model = Model::build(ModelSpec::parse(out.meta.model_spec), input_shape, num_classes, options);
    if (control.rank() == 0) {
      CheckpointExpectation expect;
      expect.model_hash = model->spec().hash();
      expect.model_spec = out.meta.model_spec;
      for (const auto& p : model->param_info()) expect.params.push_back({p.name, p.shape});
      for (const auto& b : model->buffer_info()) expect.buffers.push_back({b.name, b.shape});
      validate_checkpoint(ck, expect);
    }
  } catch (const Error& e) {
    error = fmt::format("checkpoint {} does not fit this data: {}", path, e.what());
  }
  // A build can fail on one rank only (device memory), so the verdict is
  // agreed on by all ranks before anyone waits in the parameter broadcast.
  std::vector<std::uint64_t> failed{error.empty() ? 0u : 1u};
  control.allreduce(host_i64(failed), host_i64(failed), ReduceOp::sum);
  if (failed[0] > 0) {
    const std::string root_error =
        broadcast_text(control, control.rank() == 0 ? error : std::string(), 0);
    if (!root_error.empty())
      throw Error(control.rank() == 0 ? root_error : root_error + " (reported by rank 0)");
    throw Error(!error.empty()
                    ? error
                    : fmt::format("checkpoint {}: the model could not be built on {} other rank(s)",
                                  path, failed[0]));
  }

  std::vector<float> params(model->param_count());
  if (control.rank() == 0)
    for (std::size_t i = 0; i < ck.params.size(); ++i)
      std::memcpy(params.data() + model->param_info()[i].offset, ck.params[i].second.data(),
                  ck.params[i].second.size() * sizeof(float));
  control.broadcast(BufferView{params.data(), params.size(), DType::f32, Device::cpu()},
                    BufferView{params.data(), params.size(), DType::f32, Device::cpu()}, 0);
  BufferView dst = model->params();
  copy_view(dst, view_of(params.data(), params.size()));
  // Non-trainable state (running statistics) the same way.
  std::vector<float> buffers(model->buffer_count());
  if (control.rank() == 0)
    for (std::size_t i = 0; i < ck.buffers.size(); ++i)
      std::memcpy(buffers.data() + model->buffer_info()[i].offset, ck.buffers[i].second.data(),
                  ck.buffers[i].second.size() * sizeof(float));
  if (!buffers.empty()) {
    control.broadcast(view_of(buffers.data(), buffers.size()),
                      view_of(buffers.data(), buffers.size()), 0);
    copy_view(model->buffers(), view_of(buffers.data(), buffers.size()));
  }
  out.model = std::move(model);
  return out;
}

}  // namespace ringtrain
