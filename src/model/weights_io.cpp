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

namespace {
std::string name_list(const std::vector<std::string>& v) {
  return v.size() <= 8 ? fmt::format("{}", fmt::join(v, ", "))
                       : fmt::format("{}, ... ({} in all)",
                                     fmt::join(v.begin(), v.begin() + 8, ", "), v.size());
}
}  // namespace

std::string ImportReport::describe() const {
  const std::size_t model_tensors = loaded + wrong_shape.size() + missing.size();
  std::string s = fmt::format("loaded {} of the model's {} tensors", loaded, model_tensors);
  if (!wrong_shape.empty())
    s += fmt::format("; kept the initialisation of {} whose shape differs: {}", wrong_shape.size(),
                     name_list(wrong_shape));
  if (!missing.empty())
    s += fmt::format("; kept the initialisation of {} the file lacks: {}", missing.size(),
                     name_list(missing));
  if (!unexpected.empty())
    s += fmt::format("; ignored {} of the file's tensors the model lacks: {}", unexpected.size(),
                     name_list(unexpected));
  return s;
}

ImportReport import_weights(Model& model, const std::vector<NamedTensor>& given,
                            const std::string& origin, ImportOptions options) {
  // GPT-2 weights from Hugging Face (transformer.h.0.attn.c_attn.weight, ...).
  const std::vector<NamedTensor> converted =
      has_hf_gpt2_names(given) ? from_hf_gpt2_names(given, origin) : std::vector<NamedTensor>{};
  const std::vector<NamedTensor>& tensors = converted.empty() ? given : converted;
  std::map<std::string, const NamedTensor*> by_name;
  for (const NamedTensor& t : tensors) by_name[t.name] = &t;
  ImportReport report;
  std::map<std::string, bool> used;
  const auto fill = [&](const std::vector<ParamInfo>& infos, BufferView flat) {
    // What a skipped tensor keeps: the model's own initialisation.
    std::vector<float> host(flat.count);
    if (flat.count > 0) copy_view(view_of(host.data(), host.size()), flat);
    for (const ParamInfo& p : infos) {
      const auto it = by_name.find(p.name);
      if (it == by_name.end()) {
        report.missing.push_back(p.name);
        continue;
      }
      used[p.name] = true;
      const NamedTensor& t = *it->second;
      if (t.shape != p.shape || t.data.size() != p.count) {
        report.wrong_shape.push_back(fmt::format("{} is [{}] in the file, [{}] in the model",
                                                 p.name, fmt::join(t.shape, ", "),
                                                 fmt::join(p.shape, ", ")));
        continue;
      }
      std::copy(t.data.begin(), t.data.end(), host.begin() + static_cast<std::ptrdiff_t>(p.offset));
      ++report.loaded;
    }
    return host;
  };
  const std::vector<float> params = fill(model.param_info(), model.params());
  const std::vector<float> buffers = fill(model.buffer_info(), model.buffers());
  for (const NamedTensor& t : tensors)
    if (!used.count(t.name) && !is_counter(t.name)) report.unexpected.push_back(t.name);
  if (!options.skip_mismatched) {
    const std::string hint =
        options.skip_flag.empty()
            ? std::string()
            : fmt::format(
                  " (to fine-tune with a new head, pass {}: these then keep their fresh "
                  "initialisation)",
                  options.skip_flag);
    RT_CHECK(report.wrong_shape.empty(), "weights {}: shapes differ from model '{}': {}{}", origin,
             model.spec().describe(), name_list(report.wrong_shape), hint);
    RT_CHECK(report.missing.empty(), "weights {}: model '{}' needs tensors the file lacks: {}{}",
             origin, model.spec().describe(), name_list(report.missing), hint);
    RT_CHECK(report.unexpected.empty(), "weights {}: tensors that model '{}' does not have: {}{}",
             origin, model.spec().describe(), name_list(report.unexpected), hint);
  }
  RT_CHECK(report.loaded > 0, "weights {}: not one tensor fits model '{}' (names or shapes)",
           origin, model.spec().describe());
  copy_view(model.params(), view_of(params.data(), params.size()));
  if (!buffers.empty()) copy_view(model.buffers(), view_of(buffers.data(), buffers.size()));
  return report;
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
