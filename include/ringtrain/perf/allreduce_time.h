// The time of one all-reduce on a cluster of two link tiers (inside a node,
// across nodes), each described by its fit (link_fit.h): a flat ring or a
// hierarchical all-reduce, its ring steps priced from the measured step curve
// where the tier has one. Also the side effects a step predictor needs: the
// CPU an all-reduce takes from compute on a shared core, the wait for the last
// rank, and the bucket size at which latency stops mattering.
#pragma once

#include <string>

#include "ringtrain/perf/link_fit.h"

namespace ringtrain {

// How the ranks of a (predicted) job are placed.
struct ClusterShape {
  int nodes = 1;
  int ranks_per_node = 1;
  int world() const { return nodes * ranks_per_node; }
};

enum class AllreduceAlgorithm { ring, hierarchical };
// "ring" | "hierarchical"; Error naming the value otherwise.
AllreduceAlgorithm parse_allreduce_algorithm(const std::string& name);
const char* allreduce_algorithm_name(AllreduceAlgorithm algorithm);

struct LinkTiers {
  LinkParams intra;  // between ranks of one node
  LinkParams inter;  // between nodes (one rank per node measured it)
};

// Predicted seconds of one all-reduce of `bytes` per rank, each ring step
// priced by ring_step_seconds (the fit where a tier has no step curve).
// Assumptions: no congestion, one tier per level.
//   ring: one flat ring over all W ranks; with more than one node every step
//         waits for the slowest hop, an inter-node one: 2(W-1)(a_e + n/W b_e).
//   hierarchical: reduce-scatter and all-gather inside each node (G ranks) and a
//         ring all-reduce of each rank's n/G share across the N nodes:
//         2(G-1)(a_i + n/G b_i) + 2(N-1)(a_e + n/(G N) b_e).
// One rank: 0.
double allreduce_seconds(double bytes, const ClusterShape& shape, AllreduceAlgorithm algorithm,
                         const LinkTiers& links);

// The CPU share (LinkParams::cpu_share) of the tiers an all-reduce of this
// shape uses: inter across nodes, intra inside one; the larger of both for a
// hierarchical all-reduce that uses both. One rank: 0.
double allreduce_cpu_share(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                           const LinkTiers& links);

// The arrival wait (LinkParams::arrival_wait_s) of the tiers an all-reduce of
// this shape uses, the larger of both for a hierarchical one. One rank: 0.
double allreduce_arrival_wait(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                              const LinkTiers& links);

// The arrival lag (LinkParams::arrival_lag_s) of the tiers an all-reduce of
// this shape uses, the larger of both for a hierarchical one. One rank: 0.
double allreduce_arrival_lag(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                             const LinkTiers& links);

// The same tiers with each tier's under-load alpha and beta, and the compute
// loss of the tiers an all-reduce of this shape uses (the larger of both for a
// hierarchical one that uses both). `complete` is false when a tier the shape
// needs was not measured under load.
struct UnderLoadLinks {
  LinkTiers tiers;
  double compute_loss = 0;
  bool complete = false;
};
UnderLoadLinks under_load_links(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                                const LinkTiers& links);

// The smallest bucket (bytes) whose latency part, allreduce_seconds(0), stays
// within `latency_share` of its transfer part, by the fits' alpha and beta
// (the step curves do not say what a step costs at no bytes). 0 for one rank, or when the
// fits have no bandwidth term.
double suggest_bucket_bytes(const ClusterShape& shape, AllreduceAlgorithm algorithm,
                            const LinkTiers& links, double latency_share = 0.05);

}  // namespace ringtrain
