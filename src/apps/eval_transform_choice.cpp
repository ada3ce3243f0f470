#include "apps/eval_transform_choice.h"

#include <nlohmann/json.hpp>

#include "ringtrain/core/log.h"
#include "ringtrain/data/sample_transform.h"
#include "ringtrain/train/checkpoint.h"

namespace ringtrain::apps {

std::string use_eval_transform(Dataset& data, const std::string& flag,
                               const std::string& checkpoint_path, std::size_t threads) {
  std::string spec = flag;
  if (spec.empty() && !checkpoint_path.empty()) {
    const nlohmann::json config =
        nlohmann::json::parse(read_checkpoint(checkpoint_path).meta.config_json, nullptr, false);
    if (config.is_object() && config.contains("eval_transform") &&
        config["eval_transform"].is_string())
      spec = config["eval_transform"].get<std::string>();
  }
  if (spec.empty() || spec == "none") return "";
  data.set_transform(SampleTransform::parse(spec, 0, "--eval-transform"), threads);
  log0("data: evaluation transform {}{} -> samples {}", data.transform()->describe(),
       flag.empty() ? " (from the checkpoint's training run)" : "",
       shape_string(data.sample_shape()));
  return spec;
}

}  // namespace ringtrain::apps
