// The model presets beyond `cnn` and `mlp:...`: torchvision's ImageNet
// ResNets (v1.5), the CIFAR ResNets of He et al. (2016), VGG-16 with and
// without BatchNorm. Node names are torchvision's module names, so parameter
// and buffer names are torchvision's (conv1.weight, layer1.0.bn1.running_mean,
// fc.bias). The class count comes from the data; input channels too.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ringtrain/model/model_spec.h"

namespace ringtrain {

// Whether `name` is a preset of this file.
bool is_graph_preset(std::string_view name);
// The preset's graph for `classes` outputs; Error for an unknown name.
ModelSpec graph_preset(std::string_view name, std::size_t classes);
// name: one-line description, for --help and the README.
std::vector<std::pair<std::string, std::string>> graph_preset_list();

}  // namespace ringtrain
