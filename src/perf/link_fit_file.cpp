// See link_fit_file.h.
#include "ringtrain/perf/link_fit_file.h"

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"

namespace ringtrain {

nlohmann::json read_link_fit_file(const std::string& path) {
  std::ifstream f(path);
  RT_CHECK(f.good(), "comm model {}: cannot open the file (write it with 'ringtrain bench model')",
           path);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("comm model {}: not JSON: {}", path, e.what()));
  }
  RT_CHECK(doc.value("kind", "") == "ringtrain comm model" && doc.contains("tiers"),
           "comm model {}: not a file of 'ringtrain bench model'", path);
  return doc;
}

namespace {
// The measured samples of a fit as ring steps over `ranks` ranks; none where
// the file has no samples or no rank count (files from before they were kept).
std::vector<TimingSample> step_curve_of(const nlohmann::json& fit, int ranks) {
  if (ranks < 2 || !fit.contains("samples") || !fit["samples"].is_array()) return {};
  std::vector<TimingSample> samples;
  for (const nlohmann::json& s : fit["samples"])
    samples.push_back({s.at("bytes").get<double>(), s.at("seconds").get<double>()});
  return samples.empty() ? std::vector<TimingSample>{} : ring_step_curve(samples, ranks);
}

// The fit of one backend in a tier entry measured on `ranks` ranks, and how
// good it is.
LinkParams tier_fit(const nlohmann::json& b, int ranks, TierQuality& q) {
  // Files from before cpu_share was measured read as 0 (free overlap).
  LinkParams link{b.at("alpha_s").get<double>(), b.at("beta_s_per_byte").get<double>(),
                  b.value("cpu_share", 0.0)};
  q.have = true;
  q.poor = b.value("poor", false);
  q.residual = b.value("max_abs_residual", 0.0);
  link.step_curve = step_curve_of(b, ranks);
  // Measured beside a compute thread (bench model --under-load).
  if (b.contains("under_load")) {
    const nlohmann::json& u = b["under_load"];
    link.has_under_load = true;
    link.loaded_alpha_s = u.at("alpha_s").get<double>();
    link.loaded_beta_s_per_byte = u.at("beta_s_per_byte").get<double>();
    link.compute_loss = u.at("compute_loss").get<double>();
    link.loaded_step_curve = step_curve_of(u, ranks);
    q.poor_under_load = u.value("poor", false);
    q.residual_under_load = u.value("max_abs_residual", 0.0);
  }
  // Measured right after compute (bench model --after-compute).
  if (b.contains("after_compute")) {
    link.arrival_wait_s = std::max(0.0, b["after_compute"].value("arrival_wait_s", 0.0));
    link.arrival_lag_s = std::max(0.0, b["after_compute"].value("arrival_lag_s", 0.0));
  }
  return link;
}
bool has_backend(const nlohmann::json& tier, const std::string& backend) {
  return tier.is_object() && tier.contains("backends") && tier["backends"].contains(backend);
}
}  // namespace

LoadedLinkTiers link_tiers_for(const nlohmann::json& doc, const std::string& backend, int nodes) {
  LoadedLinkTiers m;
  m.poor_bound = doc.value("poor_bound", 0.0);
  const nlohmann::json& tiers = doc["tiers"];
  if (has_backend(tiers.value("intra", nlohmann::json()), backend))
    m.tiers.intra =
        tier_fit(tiers["intra"]["backends"][backend], tiers["intra"].value("ranks", 0), m.intra);
  // Across nodes: the fit measured on `nodes` nodes where the file has one,
  // else on the nearest count below (the smallest if none is below), else the
  // last one measured.
  const nlohmann::json* inter = nullptr;
  if (nodes > 1 && tiers.contains("inter_by_nodes") && tiers["inter_by_nodes"].is_object()) {
    int below = 0, above = 0;
    const nlohmann::json *at_below = nullptr, *at_above = nullptr;
    for (const auto& [key, entry] : tiers["inter_by_nodes"].items()) {
      int k = 0;
      try {
        k = std::stoi(key);
      } catch (const std::exception&) {
        continue;
      }
      if (!has_backend(entry, backend)) continue;
      if (k <= nodes && k > below) {
        below = k;
        at_below = &entry;
      } else if (k > nodes && (above == 0 || k < above)) {
        above = k;
        at_above = &entry;
      }
    }
    inter = at_below ? at_below : at_above;
    m.inter_nodes = at_below ? below : above;
  }
  if (!inter && has_backend(tiers.value("inter", nlohmann::json()), backend)) {
    inter = &tiers["inter"];
    m.inter_nodes = tiers["inter"].value("nodes", 0);
  }
  if (inter)
    m.tiers.inter = tier_fit((*inter)["backends"][backend], (*inter).value("ranks", 0), m.inter);
  return m;
}

}  // namespace ringtrain
