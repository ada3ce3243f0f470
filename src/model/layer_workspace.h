#pragma once

#include <cstddef>
#include <string>

#include "model/layer.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain {

// A float workspace of a layer on the context's device, per sample times the
// batch. On a GPU it is allocated once at build time for the largest batch
// (the hot loop neither allocates nor waits); on the CPU it grows on first use
// instead, so that `model show --model gpt2` stays cheap.
class LayerWorkspace {
 public:
  LayerWorkspace() = default;
  LayerWorkspace(const ComputeContext& ctx, std::size_t per_sample, std::size_t max_batch);
  // Room for `batch` samples; an Error naming `layer` past the GPU's max batch.
  float* get(std::size_t batch, const std::string& layer);

 private:
  Device device_ = Device::cpu();
  std::size_t per_sample_ = 0, max_batch_ = 0;
  Tensor data_;
};

}  // namespace ringtrain
