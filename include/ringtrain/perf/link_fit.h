// The alpha-beta fit of a link's all-reduce time, from measurements. A link
// tier (inside a node, or across nodes) is described by a latency alpha per
// message step and an inverse bandwidth beta per byte; a ring all-reduce of
// n bytes over W ranks takes 2(W-1) steps of n/W bytes each:
//   t(n) = 2(W-1) alpha + 2(W-1)/W n beta.
// Measured times at several sizes give intercept and slope by weighted least
// squares (relative error, so small and large messages weigh alike), hence
// alpha and beta (allreduce_time.h prices an all-reduce with them). Pure
// arithmetic: no communicator, no device.
#pragma once

#include <cstddef>
#include <vector>

namespace ringtrain {

struct TimingSample {
  double bytes = 0;    // all-reduce payload per rank
  double seconds = 0;  // time of one all-reduce of that payload
};

struct LinkParams {
  double alpha_s = 0;          // seconds per ring step (latency)
  double beta_s_per_byte = 0;  // seconds per byte (1 / bandwidth)
  // Share of one core a rank's all-reduce keeps busy while it runs (CPU time
  // over wall time, measured by `bench model`; the kernel's TCP work counts).
  // Used only when the communication has no core of its own (step_predictor.h).
  double cpu_share = 0;
  // The same link measured with a compute thread beside the all-reduce on each
  // rank's core (`bench model --under-load`): where communication shares a
  // core with compute, each slows the other. An all-reduce that overlaps
  // compute takes this alpha and beta, and compute loses `compute_loss` of its
  // rate while an all-reduce runs (1 - compute rate beside it / alone).
  bool has_under_load = false;
  double loaded_alpha_s = 0;
  double loaded_beta_s_per_byte = 0;
  double compute_loss = 0;
  // How much longer the all-reduce after compute takes than alone (`bench
  // model --after-compute`): ranks that share cores end their compute apart,
  // and the step's exposed all-reduce waits for the last. 0 where unmeasured.
  double arrival_wait_s = 0;
  // How far the last rank is behind the ranks' mean when they end their
  // compute (same measurement): it reaches every bucket that much later, so
  // each all-reduce starts then. 0 where unmeasured (files from before it).
  double arrival_lag_s = 0;
  // The measured times behind the fit, one ring step each (ring_step_curve):
  // a chunk between two measured ones is priced by the line through those
  // two, not by the fit. A shaped link is not one line: its token bucket lets
  // a small all-reduce through at full speed, and a fit through that size
  // priced the 1-2 MiB buckets 13% too cheap. Empty: the fit everywhere.
  std::vector<TimingSample> step_curve{};
  std::vector<TimingSample> loaded_step_curve{};  // the same beside compute
};

struct LinkFit {
  LinkParams link;
  double intercept_s = 0;         // fitted t(0)
  double slope_s_per_byte = 0;    // fitted dt/dn
  std::vector<double> residuals;  // (measured - fitted) / measured, per sample
  double max_abs_residual = 0;    // largest |residual|
  bool poor = false;              // max_abs_residual > the bound given to the fit
};

// Fits t(n) = intercept + slope * n to samples of a ring all-reduce over
// `ranks` ranks (>= 2) and converts to alpha and beta. Needs at least two
// distinct sizes and positive times (Error otherwise). A fit whose largest
// relative residual exceeds `poor_bound` is marked poor. A negative intercept
// or slope (noise) is clamped to 0 and the residuals are those of the clamped
// line, so a fit that needed clamping shows it.
LinkFit fit_ring_allreduce(const std::vector<TimingSample>& samples, int ranks, double poor_bound);

// Samples of a ring all-reduce over `ranks` ranks (>= 2) as ring steps: bytes
// the chunk n/W a step moves, seconds the all-reduce's time over its 2(W-1)
// steps; ascending by chunk, a size measured more than once at its mean time.
// A step moving `chunk` bytes is then priced (ring_step_seconds): between two
// measured chunks, on the line through them; beyond the largest, its time plus
// beta per byte more; below the smallest, its time less beta per byte, never
// under alpha.
std::vector<TimingSample> ring_step_curve(const std::vector<TimingSample>& samples, int ranks);
double ring_step_seconds(double chunk_bytes, double alpha_s, double beta_s_per_byte,
                         const std::vector<TimingSample>& step_curve);

}  // namespace ringtrain
