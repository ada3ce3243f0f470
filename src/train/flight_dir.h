// Where a training run keeps its flight records (flight_recorder.h).
#pragma once

#include <filesystem>
#include <string>

#include "ringtrain/train/train_config.h"

namespace ringtrain {

// --flight-dir, else <logdir>/flight, else "flight" beside --ckpt-dir; "" when
// the run writes no files at all (the records then stay in memory).
inline std::string flight_dir(const TrainConfig& cfg) {
  if (!cfg.flight_dir.empty()) return cfg.flight_dir;
  if (!cfg.logdir.empty()) return (std::filesystem::path(cfg.logdir) / "flight").string();
  if (!cfg.ckpt_dir.empty()) {
    const std::filesystem::path ckpt = std::filesystem::path(cfg.ckpt_dir).lexically_normal();
    const std::filesystem::path parent =
        ckpt.has_filename() ? ckpt.parent_path() : ckpt.parent_path().parent_path();
    return (parent / "flight").string();
  }
  return {};
}

}  // namespace ringtrain
