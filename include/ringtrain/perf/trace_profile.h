// The step profile the step predictor (step_predictor.h) predicts from, read
// from a --trace file of a short training run: per step, the time before
// backward, backward, the optimizer, and each gradient bucket's size and the
// moment backward produced it (the "bucket k ready" spans, relative to
// backward's start). Each quantity is the median over the steps after the
// warm-up, so one slow step does not move the prediction.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "ringtrain/perf/step_predictor.h"

namespace ringtrain {

struct TraceProfile {
  StepProfile profile;
  std::size_t steps_used = 0;  // steps the medians are taken over
  int ranks = 0;               // ranks the trace holds
};

// From a trace document (TraceWriter's format, merged or one rank's) for
// `rank`: skips the first `warmup_steps` steps and the last (it has no next
// step to close its period). The time before backward is the whole step period
// less backward, the wait for the all-reduce after it, and the optimizer, so
// data wait, forward and per-step overhead all count as compute. Error when
// the trace lacks the spans (an older trace without bucket sizes, too few
// steps, no such rank).
TraceProfile profile_from_trace(const nlohmann::json& trace, int rank = 0,
                                std::size_t warmup_steps = 1);
// Reads and parses `path` first; errors name the file.
TraceProfile profile_from_trace_file(const std::string& path, int rank = 0,
                                     std::size_t warmup_steps = 1);

}  // namespace ringtrain
