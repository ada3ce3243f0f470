// Choosing a cuDNN convolution algorithm from what cuDNN's Find measured: a
// pure function over plain records (no cuDNN types), so the rule is
// unit-tested on machines without a GPU. src/ops/cuda/gpu_conv_plan.cpp turns
// cudnnConvolution*AlgoPerf_t into these records.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

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

// The three operations of a convolution, each with its own cuDNN algorithms.
enum class ConvAlgoOp { forward, backward_filter, backward_data };

// cuDNN's name of algorithm `algo` of `op`, without the
// CUDNN_CONVOLUTION_*_ALGO_ prefix ("IMPLICIT_PRECOMP_GEMM", "ALGO_1"), or
// "algo N" for a value this build does not know. The values are cuDNN's enums (cudnn_ops.h),
// written out here so that the names are tested without cuDNN.
std::string conv_algo_name(ConvAlgoOp op, int algo);

// The records a choice by time runs (gpu_conv_plan.cpp's timed_pick), in
// their order (cuDNN's heuristic rank): every record the rules pass, except
// that with `transforms_first_only` (FMA math, --tf32 off: the run meant to be
// closest to the CPU) an FFT or Winograd algorithm, which rounds otherwise
// than a GEMM, is kept only as the first, the heuristics' own pick: a timed
// choice does not bring one in.
std::vector<std::size_t> conv_algorithms_to_time(ConvAlgoOp op,
                                                 std::span<const ConvAlgoRecord> records,
                                                 const ConvAlgoRules& rules,
                                                 bool transforms_first_only);

// The records that rank ahead of the chosen one (faster, or earlier in
// cuDNN's heuristic order at an equal rank) and why each was passed over:
// "ALGO_0 nondeterministic; FFT workspace 3.0 GiB over 2.0 GiB", or "" when
// the choice is cuDNN's first. What the rules (determinism above all) cost.
std::string describe_passed_over(ConvAlgoOp op, std::span<const ConvAlgoRecord> records,
                                 std::size_t pick, const ConvAlgoRules& rules);

// One chosen algorithm as bench step --layers shows it:
// "IMPLICIT_PRECOMP_GEMM tensor ws=1.50MiB" (tensor: tensor cores allowed,
// TF32 for float data; fma: not; ws: the workspace it asks for, in B, KiB or
// MiB).
std::string describe_conv_choice(ConvAlgoOp op, int algo, ConvAlgoMath math,
                                 std::size_t workspace_bytes);

}  // namespace ringtrain::detail
