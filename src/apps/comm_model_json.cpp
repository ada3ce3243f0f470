// See comm_model_json.h.
#include "apps/comm_model_json.h"

#include <cstdio>
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

CommModel comm_model_for(const nlohmann::json& doc, const std::string& path,
                         const std::string& backend, bool allow_poor, bool& have_intra,
                         bool& have_inter, bool& used_poor) {
  CommModel m;
  have_intra = have_inter = used_poor = false;
  for (const char* tier : {"intra", "inter"}) {
    if (!doc["tiers"].contains(tier)) continue;
    const nlohmann::json& t = doc["tiers"][tier];
    if (!t.contains("backends") || !t["backends"].contains(backend)) continue;
    const nlohmann::json& b = t["backends"][backend];
    RT_CHECK(allow_poor || !b.value("poor", false),
             "comm model {}: the {} fit of backend {} is poor (largest residual {:.0f}% over the "
             "bound {:.0f}%), so it is not used; measure again on a quieter machine, or accept it "
             "with --allow-poor-fit",
             path, tier, backend, 100 * b.value("max_abs_residual", 0.0),
             100 * doc.value("poor_bound", 0.0));
    used_poor |= b.value("poor", false);
    if (b.value("poor", false))
      std::printf(
          "# warning: using the POOR %s fit of backend %s from %s (largest residual %.0f%%), as "
          "--allow-poor-fit asks\n",
          tier, backend.c_str(), path.c_str(), 100 * b.value("max_abs_residual", 0.0));
    LinkParams p{b.at("alpha_s").get<double>(), b.at("beta_s_per_byte").get<double>()};
    if (std::string(tier) == "intra") {
      m.intra = p;
      have_intra = true;
    } else {
      m.inter = p;
      have_inter = true;
    }
  }
  return m;
}

}  // namespace ringtrain::apps
