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
//
// With skip_mismatched (fine-tuning with a new head, as Hugging Face's
// ignore_mismatched_sizes): a tensor whose shape differs, one the file lacks
// and one the model lacks are skipped instead, the model keeping its own
// initialisation for them; the report lists them.
struct ImportOptions {
  bool skip_mismatched = false;
  // The flag that sets skip_mismatched, named when a strict import refuses.
  std::string skip_flag{};
};
struct ImportReport {
  std::size_t loaded = 0;                // tensors copied from the file
  std::vector<std::string> wrong_shape;  // "fc.weight is [1000, 512] in the file, [4, 512] ..."
  std::vector<std::string> missing;      // the model's tensors the file lacks
  std::vector<std::string> unexpected;   // the file's tensors the model lacks
  // "loaded 62 of 64 tensors; kept the initialisation of 2 whose shape differs: ..."
  std::string describe() const;
};
ImportReport import_weights(Model& model, const std::vector<NamedTensor>& tensors,
                            const std::string& origin, ImportOptions options = {});

// The model's parameters and state, on the host, in model order.
std::vector<NamedTensor> export_weights(Model& model);

}  // namespace ringtrain
