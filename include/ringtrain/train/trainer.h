// `ringtrain train`: synchronous data-parallel training. Every rank runs the
// same steps on its own shard; gradients are averaged bucket by bucket while
// backward goes on; the optimizer waits for all buckets.
#pragma once

#include <cstdint>
#include <string>

#include "ringtrain/launch/topology.h"
#include "ringtrain/train/train_config.h"

namespace ringtrain {

struct TrainSummary {
  std::uint64_t steps = 0;  // optimizer steps completed (in total, across resumes)
  double epochs = 0;        // data epochs covered
  double test_accuracy = 0;
  double test_loss = 0;
  std::uint64_t test_n = 0;
  double samples_per_second = 0;  // global, mean over this run's steps
  // A language model's: test tokens, exp(test loss), tokens per second (0 otherwise).
  std::uint64_t test_tokens = 0;
  double test_perplexity = 0, tokens_per_second = 0;
  // The median step of this run after its first progress window (warm-up:
  // first touches, allocations, connection set-up), over median_steps steps;
  // a slow spell of a shared machine moves the mean above but not this.
  double step_s_median = 0;
  std::uint64_t median_steps = 0;
  bool stopped_by_signal =
      false;  // SIGINT, SIGTERM or SIGUSR1: a checkpoint was written if --ckpt-dir
  std::string last_checkpoint;
};

// Collective over the world. Throws Error on bad input (on every rank where it
// can be detected; otherwise the failing rank's fatal() ends the job).
TrainSummary train(const TrainConfig& config, const Topology& topology);

}  // namespace ringtrain
