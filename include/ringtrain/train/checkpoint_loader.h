// Loading a checkpoint into a fresh model for evaluation and prediction, on
// any number of ranks: rank 0 reads and checks the file (ranks need not share a
// file system) and broadcasts it; every rank builds the model from the
// checkpoint's own spec. A bad checkpoint throws the same Error on every rank,
// so a caller that survives it (the watcher) stays in step across ranks.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/model/model.h"
#include "ringtrain/train/checkpoint.h"

namespace ringtrain {

struct CheckpointModel {
  std::unique_ptr<Model> model;
  CheckpointMeta meta;
  std::string path;
};

// Collective over `control`. input_shape and num_classes come from the data the
// model will see; a checkpoint whose model does not fit them is an Error.
CheckpointModel load_checkpoint_model(const std::string& path, Communicator& control,
                                      const std::vector<std::size_t>& input_shape, int num_classes,
                                      const ModelOptions& options);

}  // namespace ringtrain
