// Where a training run keeps its flight records (flight_recorder.h).
#pragma once

#include <filesystem>
#include <string>

#include "ringtrain/train/train_config.h"

namespace ringtrain {

// --flight-dir, else <logdir>/flight, else <ckpt-dir>/flight; "" when the run
// writes no files at all (the records then stay in memory). Inside the run's
// own directory, never beside it: runs/a and runs/b must not share (and
// overwrite) one runs/flight.
inline std::string flight_dir(const TrainConfig& cfg) {
  if (!cfg.flight_dir.empty()) return cfg.flight_dir;
  if (!cfg.logdir.empty()) return (std::filesystem::path(cfg.logdir) / "flight").string();
  if (!cfg.ckpt_dir.empty()) return (std::filesystem::path(cfg.ckpt_dir) / "flight").string();
  return {};
}

}  // namespace ringtrain
