// The file `ringtrain bench model` writes and `ringtrain bench predict` reads:
// per link tier ("intra": ranks of one node, "inter": one rank per node) and
// per backend, the fitted alpha and beta with the samples and residuals
// behind them.
//   {"kind": "ringtrain comm model", "poor_bound": 0.25,
//    "tiers": {"inter": {"ranks": 2, "nodes": 2, "link": "rate=1gbit delay=0",
//                        "backends": {"ring": {"alpha_s": ..., "beta_s_per_byte": ...,
//                                              "max_abs_residual": ..., "poor": false,
//                                              "samples": [{"bytes", "seconds",
//                                                           "fit_seconds", "residual"}]}}}}}
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ringtrain/sync/comm_model.h"

namespace ringtrain::apps {

nlohmann::json read_comm_model_file(const std::string& path);
// The backend's model: intra and inter where the file has them; `have_intra`
// and `have_inter` say which. A tier whose fit is poor is an Error naming it
// unless allow_poor (then used_poor says one was used, with a warning printed).
CommModel comm_model_for(const nlohmann::json& doc, const std::string& path,
                         const std::string& backend, bool allow_poor, bool& have_intra,
                         bool& have_inter, bool& used_poor);

}  // namespace ringtrain::apps
