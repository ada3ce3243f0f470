// The all-reduce a step exposes ('ringtrain bench model --after-compute'):
// each call comes right after the same amount of compute on every rank (sized
// to take LinkBenchOptions::after_compute_ms on a core of its own). Where ranks
// share cores the compute curve prices a step's compute at the ranks' mean
// rate, but the ranks end it apart and the all-reduce waits for the last: a
// cycle of compute and all-reduce takes longer than the compute at the mean
// rate plus the all-reduce alone. That excess is the wait.
#pragma once

#include <cstddef>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/perf/link_bench.h"
#include "ringtrain/perf/link_fit.h"

namespace ringtrain {

struct AfterComputeSweep {
  std::vector<TimingSample> latency;  // per size: own compute end -> all-reduce end, ranks' mean
  std::vector<double> cycle_s;        // per size: one compute and all-reduce, ranks' mean
  // per size: the cycle minus the compute at the mean rate and the all-reduce
  // alone, both timed just before it (the median over rounds): the wait
  std::vector<double> wait_s;
  double compute_mean_s = 0;  // the compute at the ranks' mean rate, all at once (median)
  double spread_s = 0;        // median over calls of the ranks' latest minus earliest arrival
  double lag_s = 0;           // median over calls of the latest arrival minus the ranks' mean
};

// Times each of `sizes` (bytes per rank, within `all`) on `comm`: options'
// warm-up calls, then its rounds of iters calls, each after a compute burst.
// `harness` (a host communicator over the same ranks) carries the timings
// between ranks, outside the timed calls.
AfterComputeSweep sweep_after_compute(Communicator& comm, const BufferView& all,
                                      const std::vector<std::size_t>& sizes,
                                      const LinkBenchOptions& options, const Topology& topo,
                                      Communicator& harness);

}  // namespace ringtrain
