// See after_compute_sweep.h: the compute bursts, the cycles and the wait.
#include "ringtrain/perf/after_compute_sweep.h"

#include <algorithm>
#include <cstdint>

#include "core/median.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/launch/topology.h"
#include "ringtrain/perf/compute_load.h"

namespace ringtrain {

AfterComputeSweep sweep_after_compute(Communicator& comm, const BufferView& all,
                                      const std::vector<std::size_t>& sizes,
                                      const LinkBenchOptions& o, const Topology& topo,
                                      Communicator& harness) {
  const int w = topo.world_size();
  auto reduce = [&](std::vector<double>& v, ReduceOp op) {
    BufferView view{v.data(), v.size(), DType::f64, Device::cpu()};
    harness.allreduce(view, view, op);
  };
  // Each rank times its core alone (the others wait), and all run the same
  // work, as the ranks of a training step do: the mean of those rates over
  // --after-compute ms. (Sized per rank, a rate timed a little high on one rank
  // gave it more work every cycle, and the others a wait no training step has.)
  std::vector<double> rate{0};
  for (int r = 0; r < w; ++r) {
    harness.barrier();
    if (r == topo.rank()) rate[0] = ComputeBurst::gemms_per_second(0.2);
  }
  reduce(rate, ReduceOp::sum);
  ComputeBurst burst(
      static_cast<std::uint64_t>(std::max(1.0, rate[0] / w * o.after_compute_ms * 1e-3)));
  AfterComputeSweep out;
  // The compute at the mean rate: every rank computes for the same wall time,
  // so all compete throughout; 1 / the ranks' mean rate. Timed in each round
  // just before its cycles, as the machine's speed drifts.
  auto compute_at_mean_rate = [&] {
    harness.barrier();
    Stopwatch sw;
    double done = 0;
    while (sw.seconds() < 0.1 || done < 3) {
      burst.run();
      ++done;
    }
    std::vector<double> rate_sum{done / sw.seconds()};
    reduce(rate_sum, ReduceOp::sum);
    return rate_sum[0] > 0 ? w / rate_sum[0] : 0.0;
  };
  std::vector<double> spreads, lags, means;
  for (std::size_t bytes : sizes) {
    BufferView buf{all.ptr, bytes / 4, DType::f32, all.device};
    for (int i = 0; i < o.warmup; ++i) {
      burst.run();
      comm.allreduce(buf, buf, ReduceOp::sum);
    }
    std::vector<double> lat_rounds, cycle_rounds, excess_rounds;
    for (int r = 0; r < o.rounds; ++r) {
      // The compute at the mean rate and the all-reduce alone, timed just
      // before the cycles they are subtracted from.
      const double mean_s = compute_at_mean_rate();
      means.push_back(mean_s);
      comm.barrier();
      Stopwatch alone_sw;
      for (int i = 0; i < o.iters; ++i) comm.allreduce(buf, buf, ReduceOp::sum);
      std::vector<double> alone{alone_sw.seconds() / o.iters};
      reduce(alone, ReduceOp::sum);
      comm.barrier();
      std::vector<double> lat(static_cast<std::size_t>(o.iters));
      Stopwatch round;
      for (double& l : lat) {
        burst.run();
        Stopwatch sw;
        comm.allreduce(buf, buf, ReduceOp::sum);
        l = sw.seconds();
      }
      std::vector<double> cycle{round.seconds() / static_cast<double>(lat.size())};
      // Outside the timed calls: means over ranks and the arrival spread.
      std::vector<double> sum = lat, hi = lat, lo = lat;
      reduce(sum, ReduceOp::sum);
      reduce(hi, ReduceOp::max);
      reduce(lo, ReduceOp::min);
      reduce(cycle, ReduceOp::sum);
      double mean = 0;
      for (std::size_t i = 0; i < lat.size(); ++i) {
        mean += sum[i] / w;
        spreads.push_back(hi[i] - lo[i]);
        // The all-reduce ends together, so the last to arrive waited least.
        lags.push_back(std::max(0.0, sum[i] / w - lo[i]));
      }
      lat_rounds.push_back(mean / static_cast<double>(lat.size()));
      cycle_rounds.push_back(cycle[0] / w);
      excess_rounds.push_back(cycle[0] / w - mean_s - alone[0] / w);
    }
    out.latency.push_back({static_cast<double>(bytes), median(lat_rounds)});
    out.cycle_s.push_back(median(cycle_rounds));
    out.wait_s.push_back(median(excess_rounds));
  }
  out.compute_mean_s = median(means);
  out.spread_s = median(spreads);
  out.lag_s = median(lags);
  return out;
}

}  // namespace ringtrain
