// Hugging Face GPT-2 names for the gpt presets' weights (transformers'
// GPT2LMHeadModel): "transformer." before every ringtrain name, the four
// projection weights transposed (HF's Conv1D keeps them [in, out], ringtrain
// [out, in] as nn.Linear), and lm_head.weight, the tied copy of wte.weight.
//
//   ringtrain                    Hugging Face
//   wte.weight [V, C]            transformer.wte.weight [V, C]; lm_head.weight
//   h.0.attn.c_attn.weight [3C, C]  transformer.h.0.attn.c_attn.weight [C, 3C]
//   h.0.mlp.c_fc.weight [4C, C]     transformer.h.0.mlp.c_fc.weight [C, 4C]
//   (c_proj of attn and mlp likewise; norms and biases unchanged)
#pragma once

#include <string>
#include <vector>

#include "ringtrain/model/safetensors.h"

namespace ringtrain {

// Whether these tensors carry Hugging Face GPT-2 names (transformer.wte.weight).
bool has_hf_gpt2_names(const std::vector<NamedTensor>& tensors);
// ringtrain names -> Hugging Face's (adds lm_head.weight).
std::vector<NamedTensor> to_hf_gpt2_names(const std::vector<NamedTensor>& tensors);
// Hugging Face's -> ringtrain names. lm_head.weight must equal wte (the head is
// tied) and is dropped, as are the attention masks older files hold
// (attn.bias, attn.masked_bias). Error naming `origin` otherwise.
std::vector<NamedTensor> from_hf_gpt2_names(const std::vector<NamedTensor>& tensors,
                                            const std::string& origin);

}  // namespace ringtrain
