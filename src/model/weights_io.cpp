#include "ringtrain/model/weights_io.h"

#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/model/hf_gpt2_names.h"

namespace ringtrain {

namespace {
bool is_counter(const std::string& name) {
  const std::string suffix = ".num_batches_tracked";
  return name.size() > suffix.size() &&
         name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

void import_weights(Model& model, const std::vector<NamedTensor>& given,
                    const std::string& origin) {
  // GPT-2 weights from Hugging Face (transformer.h.0.attn.c_attn.weight, ...).
  const std::vector<NamedTensor> converted =
      has_hf_gpt2_names(given) ? from_hf_gpt2_names(given, origin) : std::vector<NamedTensor>{};
  const std::vector<NamedTensor>& tensors = converted.empty() ? given : converted;
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : tensors) by_name[t.name] = &t;
  std::vector<std::string> missing, wrong_shape;
  std::map<std::string, bool> used;
  const auto fill = [&](const std::vector<ParamInfo>& infos, BufferView flat) {
    std::vector<float> host(flat.count);
    for (const ParamInfo& p : infos) {
      const auto it = by_name.find(p.name);
      if (it == by_name.end()) {
        missing.push_back(p.name);
        continue;
      }
      used[p.name] = true;
      const NamedTensor& t = *it->second;
      if (t.shape != p.shape || t.data.size() != p.count) {
        wrong_shape.push_back(fmt::format("{} is [{}] in the file, [{}] in the model", p.name,
                                          fmt::join(t.shape, ", "), fmt::join(p.shape, ", ")));
        continue;
      }
      std::copy(t.data.begin(), t.data.end(), host.begin() + static_cast<std::ptrdiff_t>(p.offset));
    }
    return host;
  };
  const std::vector<float> params = fill(model.param_info(), model.params());
  const std::vector<float> buffers = fill(model.buffer_info(), model.buffers());
  std::vector<std::string> unexpected;
  for (const NamedTensor& t : tensors)
    if (!used.count(t.name) && !is_counter(t.name)) unexpected.push_back(t.name);
  const auto list = [](const std::vector<std::string>& v) {
    return v.size() <= 8 ? fmt::format("{}", fmt::join(v, ", "))
                         : fmt::format("{}, ... ({} in all)",
                                       fmt::join(v.begin(), v.begin() + 8, ", "), v.size());
  };
  RT_CHECK(wrong_shape.empty(), "weights {}: shapes differ from model '{}': {}", origin,
           model.spec().to_string(), list(wrong_shape));
  RT_CHECK(missing.empty(), "weights {}: model '{}' needs tensors the file lacks: {}", origin,
           model.spec().to_string(), list(missing));
  RT_CHECK(unexpected.empty(), "weights {}: tensors that model '{}' does not have: {}", origin,
           model.spec().to_string(), list(unexpected));
  copy_view(model.params(), view_of(params.data(), params.size()));
  if (!buffers.empty()) copy_view(model.buffers(), view_of(buffers.data(), buffers.size()));
}

std::vector<NamedTensor> export_weights(Model& model) {
  std::vector<float> params(model.param_count()), buffers(model.buffer_count());
  copy_view(view_of(params.data(), params.size()), model.params());
  if (!buffers.empty()) copy_view(view_of(buffers.data(), buffers.size()), model.buffers());
  std::vector<NamedTensor> out;
  const auto take = [&](const std::vector<ParamInfo>& infos, const std::vector<float>& flat) {
    for (const ParamInfo& p : infos)
      out.push_back(
          {p.name, p.shape,
           std::vector<float>(flat.begin() + static_cast<std::ptrdiff_t>(p.offset),
                              flat.begin() + static_cast<std::ptrdiff_t>(p.offset + p.count)),
           "F32"});
  };
  take(model.param_info(), params);
  take(model.buffer_info(), buffers);
  return out;
}

}  // namespace ringtrain
