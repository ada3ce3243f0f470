// Parameter groups for weight decay (--no-decay): which parameters decay.
// NVIDIA's ResNet-50 recipe and most transformer recipes exempt normalisation
// parameters and biases (and embeddings), as llm.c decides decay per tensor.
// The decision is per tensor and becomes a mask over the flat buffer, which
// the optimizers honour element by element (kernels/decay_mask.cuh).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ringtrain {

class Model;

struct NoDecay {
  bool norm = false;       // every parameter of a normalisation layer (BatchNorm, LayerNorm)
  bool bias = false;       // every tensor named *.bias
  bool embedding = false;  // embedding tables (a layer type or tensor named *embed*, wte, wpe)
  bool any() const { return norm || bias || embedding; }
  std::string to_string() const;  // "norm,bias", "" for none
};

// "" or a comma list of norm, bias, embedding (also "none"). Throws Error
// naming --no-decay and the bad item.
NoDecay parse_no_decay(std::string_view text);

// 1 where element i of the flat parameter buffer decays, 0 where `groups`
// exempts its tensor (param_count elements, host memory).
std::vector<float> decay_mask(const Model& model, const NoDecay& groups);
// The names of the tensors `groups` exempts, in buffer order.
std::vector<std::string> exempt_tensors(const Model& model, const NoDecay& groups);

}  // namespace ringtrain
