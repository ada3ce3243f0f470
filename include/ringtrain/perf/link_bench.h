// `ringtrain bench model`'s measurement: all-reduce time at a list of sizes for
// the link tier this job spans (all ranks on one node: "intra"; one rank on
// each of several nodes: "inter"), per backend, and the fit of latency alpha
// and inverse bandwidth beta to it (link_fit.h). Rank 0 prints the fit and its
// residuals and merges the tier into the file `bench predict` reads
// (link_fit_file.h), so the two tiers come from two runs. On request the same
// sizes again beside a compute thread on each rank (a shared core) and right
// after compute (the all-reduce a step exposes, after_compute_sweep.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace ringtrain {

class Topology;

struct LinkBenchOptions {
  std::vector<std::size_t> sizes;     // bytes per rank: ascending whole floats, at least two
  std::vector<std::string> backends;  // communicator kinds, measured in this order
  int iters = 10;                     // calls per timed round
  int rounds = 5;                     // timed rounds per size (the median counts)
  int warmup = 3;                     // untimed calls per size
  double poor_bound = 0.25;           // largest relative residual of a usable fit
  std::string json;                   // merge the tier into this file; empty: print only
  double timeout = 300;               // seconds a collective may wait for a peer
  bool under_load = false;            // also time the sizes beside a compute thread
  double after_compute_ms = 0;        // also time them right after this much compute; 0: not
};

// "intra" when every rank is on one node, "inter" when each node has one rank;
// Error for a job of fewer than 2 ranks or one that mixes both (it measures
// neither tier alone).
std::string link_bench_tier(const Topology& topology);

// Measures on every rank; rank 0 prints and writes. Returns the exit code (0;
// a poor fit is reported, not an error). Error for a job that is not one tier
// (fewer than 2 ranks, or several ranks on a node of several) and for a file
// that cannot be written.
int run_link_bench(const LinkBenchOptions& options, const Topology& topology);

}  // namespace ringtrain
