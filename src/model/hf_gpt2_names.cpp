#include "ringtrain/model/hf_gpt2_names.h"

#include <map>

#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {
const std::string kPrefix = "transformer.";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// HF's Conv1D weights: attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj.
bool is_conv1d_weight(const std::string& name) {
  return ends_with(name, ".c_attn.weight") || ends_with(name, ".c_proj.weight") ||
         ends_with(name, ".c_fc.weight");
}

NamedTensor transposed(const NamedTensor& t, std::string name) {
  RT_CHECK(t.shape.size() == 2, "weights: {} has {} dimensions, a projection weight has 2", t.name,
           t.shape.size());
  const std::size_t rows = t.shape[0], cols = t.shape[1];
  NamedTensor out{std::move(name), {cols, rows}, std::vector<float>(t.data.size()), t.dtype};
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) out.data[c * rows + r] = t.data[r * cols + c];
  return out;
}
}  // namespace

bool has_hf_gpt2_names(const std::vector<NamedTensor>& tensors) {
  for (const NamedTensor& t : tensors)
    if (t.name == kPrefix + "wte.weight") return true;
  return false;
}

std::vector<NamedTensor> to_hf_gpt2_names(const std::vector<NamedTensor>& tensors) {
  std::vector<NamedTensor> out;
  const NamedTensor* wte = nullptr;
  for (const NamedTensor& t : tensors) {
    if (t.name == "wte.weight") wte = &t;
    out.push_back(is_conv1d_weight(t.name)
                      ? transposed(t, kPrefix + t.name)
                      : NamedTensor{kPrefix + t.name, t.shape, t.data, t.dtype});
  }
  RT_CHECK(wte != nullptr, "weights: Hugging Face GPT-2 names need a gpt model (no wte.weight)");
  out.push_back({"lm_head.weight", wte->shape, wte->data, wte->dtype});
  return out;
}

std::vector<NamedTensor> from_hf_gpt2_names(const std::vector<NamedTensor>& tensors,
                                            const std::string& origin) {
  std::vector<NamedTensor> out;
  const NamedTensor* head = nullptr;
  for (const NamedTensor& t : tensors) {
    if (t.name == "lm_head.weight") {
      head = &t;
      continue;
    }
    // The causal masks some GPT-2 files store as buffers: ringtrain's are implied.
    if (ends_with(t.name, ".attn.bias") || ends_with(t.name, ".attn.masked_bias")) continue;
    RT_CHECK(t.name.rfind(kPrefix, 0) == 0,
             "weights {}: tensor {} is not a Hugging Face GPT-2 name (transformer.*)", origin,
             t.name);
    const std::string name = t.name.substr(kPrefix.size());
    out.push_back(is_conv1d_weight(name) ? transposed(t, name)
                                         : NamedTensor{name, t.shape, t.data, t.dtype});
  }
  if (head != nullptr) {
    const NamedTensor* wte = nullptr;
    for (const NamedTensor& t : out)
      if (t.name == "wte.weight") wte = &t;
    RT_CHECK(wte != nullptr && wte->shape == head->shape && wte->data == head->data,
             "weights {}: lm_head.weight differs from transformer.wte.weight, and ringtrain's "
             "head is tied to the token embedding",
             origin);
  }
  return out;
}

}  // namespace ringtrain
