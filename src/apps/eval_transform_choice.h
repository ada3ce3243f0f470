// Which transform eval and predict apply to a split: --eval-transform when
// given, else the one the checkpoint's training run recorded in its config
// (derived from its --augment), else none. A model is then judged on inputs
// made as it was trained on.
#pragma once

#include <cstddef>
#include <string>

#include "ringtrain/data/dataset.h"

namespace ringtrain::apps {

// Returns the spec used ("" for none) and sets it on `data`.
std::string use_eval_transform(Dataset& data, const std::string& flag,
                               const std::string& checkpoint_path, std::size_t threads);

}  // namespace ringtrain::apps
