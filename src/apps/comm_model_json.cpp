// See comm_model_json.h.
#include "apps/comm_model_json.h"

#include <fstream>

#include <fmt/format.h>

#include "ringtrain/core/check.h"
#include "ringtrain/core/error.h"

namespace ringtrain::apps {

nlohmann::json read_comm_model_file(const std::string& path) {
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

LoadedCommModel comm_model_for(const nlohmann::json& doc, const std::string& backend) {
  LoadedCommModel m;
  m.poor_bound = doc.value("poor_bound", 0.0);
  for (const char* tier : {"intra", "inter"}) {
    if (!doc["tiers"].contains(tier)) continue;
    const nlohmann::json& t = doc["tiers"][tier];
    if (!t.contains("backends") || !t["backends"].contains(backend)) continue;
    const nlohmann::json& b = t["backends"][backend];
    // Files from before cpu_share was measured read as 0 (free overlap).
    LinkParams p{b.at("alpha_s").get<double>(), b.at("beta_s_per_byte").get<double>(),
                 b.value("cpu_share", 0.0)};
    // Measured beside a compute thread (bench model --under-load).
    if (b.contains("under_load")) {
      const nlohmann::json& u = b["under_load"];
      p.has_under_load = true;
      p.loaded_alpha_s = u.at("alpha_s").get<double>();
      p.loaded_beta_s_per_byte = u.at("beta_s_per_byte").get<double>();
      p.compute_loss = u.at("compute_loss").get<double>();
    }
    const bool poor = b.value("poor", false);
    const double residual = b.value("max_abs_residual", 0.0);
    if (std::string(tier) == "intra") {
      m.model.intra = p;
      m.have_intra = true;
      m.poor_intra = poor;
      m.residual_intra = residual;
    } else {
      m.model.inter = p;
      m.have_inter = true;
      m.poor_inter = poor;
      m.residual_inter = residual;
    }
  }
  return m;
}

}  // namespace ringtrain::apps
