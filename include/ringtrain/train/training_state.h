// What a checkpoint holds of a training run, next to the checkpoint code:
// assembled from the live model and optimizer when saving, applied to them
// when resuming. The trainer decides when; this decides what.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ringtrain/data/sharded_sampler.h"
#include "ringtrain/train/train_config.h"

namespace ringtrain {

class Communicator;
class Model;
struct ModelSpec;
class Optimizer;

// fp16's dynamic loss scale, as a checkpoint keeps it (kernels/loss_scaler.cuh
// holds the whole state): resuming restores it, so the resumed steps are the
// same as the uninterrupted run's.
struct LossScale {
  double scale = 0;  // 0: no loss scaling
  std::uint64_t growth_tracker = 0;
  std::uint64_t overflows = 0;
};

// Where a run stands: what a checkpoint records beside the tensors.
struct RunPosition {
  std::uint64_t step = 0;                // optimizer steps done
  DataCursor next_cursor;                // the batch the next step reads
  std::size_t global_batch = 0;          // samples per optimizer step
  std::size_t sampler_global_batch = 0;  // samples per micro-step (the cursor's unit)
  int world_size = 1;
  bool finished = false;
  LossScale loss_scale;  // --precision fp16's scaler; scale 0 without one
  // The training data's input as predict --images needs it without the data
  // file (JSON, saved as the config's "input"); empty when there is none.
  std::string input_json;
};

// Rank 0 only: writes ckpt-<step>.h5 atomically into cfg.ckpt_dir (keeping
// cfg.keep) from the model's parameters and the optimizer's state, read back
// from the device (host syncs, counted). Returns the path.
std::string save_training_state(const TrainConfig& cfg, const ModelSpec& spec, Model& model,
                                Optimizer& optimizer, const RunPosition& position);

// Where a resumed run continues.
struct ResumePoint {
  std::uint64_t step = 0;
  DataCursor cursor;
  bool resumed = false;  // on every rank
  std::string path;      // rank 0 only; empty: a fresh start
  // After the broadcast, every rank's parameters hash to this (hash_bytes
  // over the flat buffer, the same hash as the file's tensors in model order).
  std::uint64_t params_hash = 0;
  LossScale loss_scale;  // the checkpoint's (scale 0: it had none), on every rank
};

// Collective over `control`. Rank 0 finds the checkpoint (cfg.resume: a file,
// or 'latest' in cfg.ckpt_dir), checks it against this run, and loads it into
// its model and optimizer; every rank learns where training continues. The
// caller then broadcasts rank 0's parameters and optimizer state.
ResumePoint resume_training_state(const TrainConfig& cfg, Communicator& control,
                                  const ModelSpec& spec, Model& model, Optimizer& optimizer,
                                  std::size_t sampler_global_batch);

}  // namespace ringtrain
