// A model's weights in and out by name: the parameters and the non-trainable
// state (BatchNorm's running statistics) as named tensors. With the presets'
// torchvision names, weights trained in PyTorch load here and back.
#pragma once

#include <string>
#include <vector>

#include "ringtrain/model/model.h"
#include "ringtrain/model/safetensors.h"

namespace ringtrain {

// Copies every parameter and state tensor of `model` from `tensors` by name.
// Strict, as PyTorch's load_state_dict: a missing tensor, a shape that
// differs, or a tensor the model does not have (other than BatchNorm's
// num_batches_tracked counters) is an Error naming them and `origin`. Hugging
// Face GPT-2 names are recognised and mapped (ringtrain/model/hf_gpt2_names.h).
void import_weights(Model& model, const std::vector<NamedTensor>& tensors,
                    const std::string& origin);

// The model's parameters and state, on the host, in model order.
std::vector<NamedTensor> export_weights(Model& model);

}  // namespace ringtrain
