// The model presets beyond `cnn` and `mlp:...`: torchvision's ImageNet
// ResNets (v1.5), the CIFAR ResNets of He et al. (2016), VGG-16 with and
// without BatchNorm. Node names are torchvision's module names, so parameter
// and buffer names are torchvision's (conv1.weight, layer1.0.bn1.running_mean,
// fc.bias). The class count comes from the data; input channels too. The
// GPT-2 presets use Hugging Face's module names (h.0.attn.c_attn.weight).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ringtrain/model/model_spec.h"

namespace ringtrain {

// Whether `name` is a preset of this file.
bool is_graph_preset(std::string_view name);
// The preset's graph for `classes` outputs; Error for an unknown name.
ModelSpec graph_preset(std::string_view name, std::size_t classes);
// The language-model presets (gpt-nano, gpt2, gpt2-medium) fix their context;
// gpt2 and gpt2-medium fix their vocabulary too (0: the data's, as
// graph_preset's `classes`). nullopt for the other presets.
struct LanguageModelShape {
  std::size_t context = 0;
  std::size_t vocab = 0;
};
std::optional<LanguageModelShape> language_model_shape(std::string_view name);
// name: one-line description, for --help and the README.
std::vector<std::pair<std::string, std::string>> graph_preset_list();
// Every preset --model takes (cnn and mlp:... too), name: one-line
// description, for `ringtrain model list` and the messages about a name that
// is not one.
std::vector<std::pair<std::string, std::string>> model_preset_list();

}  // namespace ringtrain
