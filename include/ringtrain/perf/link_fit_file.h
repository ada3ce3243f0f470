// The file `ringtrain bench model` writes and `ringtrain bench predict` reads:
// per link tier ("intra": ranks of one node, "inter": one rank per node) and
// per backend, the fitted alpha and beta with the samples and residuals
// behind them. The kind "ringtrain comm model" is the name files have always
// carried, kept so that every file written so far still loads.
//   {"kind": "ringtrain comm model", "poor_bound": 0.25,
//    "tiers": {"inter": {"ranks": 2, "nodes": 2, "link": "rate=1gbit delay=0",
//                        "backends": {"ring": {"alpha_s": ..., "beta_s_per_byte": ...,
//                                              "max_abs_residual": ..., "poor": false,
//                                              "cpu_share": ...,
//                                              "under_load": {"alpha_s", "beta_s_per_byte",
//                                                             "compute_loss", "samples"},
//                                              "after_compute": {"compute_s", "arrival_wait_s",
//                                                                "arrival_spread_s",
//                                                                "arrival_lag_s", "samples"},
//                                              "samples": [{"bytes", "seconds",
//                                                           "fit_seconds", "residual"}]}}},
//              "inter_by_nodes": {"2": {...as inter...}, "3": {...}}}}
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ringtrain/perf/allreduce_time.h"

namespace ringtrain {

nlohmann::json read_link_fit_file(const std::string& path);
// How good a tier's fits are, where the file has the tier.
struct TierQuality {
  bool have = false;
  bool poor = false;             // the fit alone
  double residual = 0;           // its largest |residual|
  bool poor_under_load = false;  // the fit beside compute (bench model --under-load)
  double residual_under_load = 0;
};
// The backend's link tiers, with intra and inter where the file has them.
struct LoadedLinkTiers {
  LinkTiers tiers;
  TierQuality intra, inter;
  double poor_bound = 0;
  int inter_nodes = 0;  // nodes the inter fit was measured on (0: not recorded)
};
// `nodes` > 1: the inter fit measured on that many nodes where the file has
// one ("inter_by_nodes"), else on the nearest count below it; a ring over
// shaped links is not the same line at every ring size.
LoadedLinkTiers link_tiers_for(const nlohmann::json& doc, const std::string& backend,
                               int nodes = 0);

}  // namespace ringtrain
