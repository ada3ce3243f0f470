// `ringtrain bench predict`'s answer: the step time, scaling efficiency and
// exposed communication at other node counts, from a short run's trace (its
// step profile, trace_profile.h) and a link fit file of `bench model` (alpha
// and beta per tier, link_fit_file.h), for ring and hierarchical all-reduce
// with overlap (step_predictor.h). Prints a CSV and a verdict line; pure
// arithmetic, nothing is measured.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "ringtrain/perf/allreduce_time.h"

namespace ringtrain {

struct ScalingPredictionOptions {
  std::string trace;                           // the Chrome trace of a short run (train --trace)
  std::string link_fit_file;                   // the file of 'bench model --json' (--comm-model)
  std::string backend = "ring";                // whose fits to use
  std::vector<AllreduceAlgorithm> algorithms;  // the first one gives the verdict
  std::vector<int> nodes;                      // node counts, ascending, distinct
  int ranks_per_node = 1;
  int cores_per_node = 0;        // 0: communication assumed to have a core of its own
  std::string scaling = "weak";  // weak (batch per rank fixed) or strong (global batch fixed)
  int profile_ranks = 1;         // ranks of the profiled run
  std::string compute_curve;     // lines of 'bench step --json'; empty: none
  double profile_batch = 0;      // per-rank batch of the profiled run (with compute_curve)
  std::string colocation = "per-node";  // which ranks share a machine: per-node or all
  int profile_rank = 0;                 // the trace's rank to profile
  std::size_t warmup_steps = 1;         // steps of the trace left out
  bool allow_poor = false;              // use fits reported poor (and say so)
  std::string pricing = "measured";     // measured (step curves) or fit (alpha, beta only)
  std::string csv;                      // write the CSV here; empty: stdout
};

// Prints the CSV (or writes it to options.csv) and the verdict on stdout;
// returns the exit code (0). Error for a trace without buckets, a missing or
// poor fit (unless allowed), or an unreadable file, each naming it.
int run_scaling_prediction(const ScalingPredictionOptions& options);

}  // namespace ringtrain
