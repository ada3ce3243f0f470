// Writes the event files that tensorboard_check.py loads with the tensorboard
// package: LOGDIR/basic (a plain run) and LOGDIR/resumed (a run interrupted
// after step 10 and resumed from a checkpoint at step 6).
#include <cmath>
#include <cstdio>
#include <string>

#include "ringtrain/core/error.h"
#include "ringtrain/train/tensorboard_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s LOGDIR\n", argv[0]);
    return 2;
  }
  const std::string logdir = argv[1];
  try {
    ringtrain::TensorBoardWriter basic(logdir + "/basic");
    for (std::uint64_t step = 1; step <= 20; ++step) {
      const double s = static_cast<double>(step);
      basic.add_scalars(step, {{"train/loss", 2.0 / s}, {"train/lr", 0.1 * std::pow(0.9, s)}});
      if (step % 5 == 0) basic.add_scalar("eval/accuracy", step, s / 40.0);
    }
    {
      ringtrain::TensorBoardWriter first(logdir + "/resumed");
      for (std::uint64_t step = 1; step <= 10; ++step)
        first.add_scalar("train/loss", step, 100.0 + static_cast<double>(step));
    }
    ringtrain::TensorBoardWriter second(logdir + "/resumed", std::uint64_t{6});
    for (std::uint64_t step = 7; step <= 12; ++step)
      second.add_scalar("train/loss", step, 200.0 + static_cast<double>(step));
  } catch (const ringtrain::Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::printf("wrote %s/basic and %s/resumed\n", logdir.c_str(), logdir.c_str());
  return 0;
}
