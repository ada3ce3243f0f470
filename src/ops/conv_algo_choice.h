// Choosing a cuDNN convolution algorithm from what cuDNN's Find measured: a
// pure function over plain records (no cuDNN types), so the rule is
// unit-tested on machines without a GPU. src/ops/cuda/gpu_conv_plan.cpp turns
// cudnnConvolution*AlgoPerf_t into these records.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>

namespace ringtrain::detail {

// What a result's mathType allows: FMA only; tensor cores (TF32 for float,
// CUDNN_DEFAULT_MATH or CUDNN_TENSOR_OP_MATH); or tensor cores with the inputs
// down-converted to half (CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION).
enum class ConvAlgoMath { fma, tensor, tensor_down_conversion };

struct ConvAlgoRecord {
  int algo = 0;
  bool success = false;        // status == CUDNN_STATUS_SUCCESS
  bool deterministic = false;  // determinism == CUDNN_DETERMINISTIC
  std::size_t memory = 0;      // workspace bytes
  float time_ms = 0;
  ConvAlgoMath math = ConvAlgoMath::fma;
};

struct ConvAlgoRules {
  std::size_t workspace_limit = 0;  // bytes
  bool require_deterministic = true;
  bool allow_tf32 = false;
};

// The index of the fastest record that passes: success, memory within the
// limit, deterministic when required, math FMA unless TF32 is allowed, never
// down-converted to half. A tie goes to the earlier record. nullopt if none.
std::optional<std::size_t> choose_conv_algorithm(std::span<const ConvAlgoRecord> records,
                                                 const ConvAlgoRules& rules);

// "algo 1 (ok, deterministic, fma, 12.0 KiB, 0.031 ms); algo 0 (...)": for the
// error when none passes.
std::string describe_conv_algorithms(std::span<const ConvAlgoRecord> records);

}  // namespace ringtrain::detail
