// Which of ringtrain's two weight-gradient GEMM forms a plan times for a
// channels-last convolution, and in which order (ops/cuda/gpu_gemm_wgrad.h
// builds them; ops/cuda/gpu_conv_plan.cpp times them beside cuDNN's graph
// engines):
// - the shifted rows (ops/shifted_gemm_wgrad.h), stride 1 only: one GEMM per
//   tap, n = C, over x and dy copied into zero grids (read in place for a
//   1x1 filter without padding);
// - the unfolded input (ops/unfolded_gemm_wgrad.h), any stride: one GEMM,
//   n = R S C, over rows of the taps' input values.
// At stride 1 which reads less depends on the channels: the shifted rows
// read dy once per tap (a 3x3 filter: nine times) and, with C not a
// multiple of 8, give cuBLASLt rows 2 C bytes apart (6 at C = 3, where its
// fast kernels want 16); the unfolded input reads dy once but writes and
// reads R S C values per output pixel. For vgg16's first convolution (C =
// 3, K = 64) the shifted rows' GEMMs read about 600 values per output pixel,
// the unfolded input's about 100; for resnet50's 3x3 convolutions (C = K)
// the two move about as many bytes once the unfolding's writes count. Both
// are timed, and the first is what an untimed run may take.
#pragma once

#include <string>
#include <vector>

#include "ops/cudnn_graph.h"

namespace ringtrain::detail {

enum class GemmWgradForm { shifted_rows, unfolded_input };

// The forms that apply to `shape`, in the order a plan lists them: at stride
// 1 the shifted rows first where 8 divides C, the unfolded input first
// otherwise (a 1x1 filter without padding: the shifted rows alone, which
// read x in place where the unfolded input would copy it); at another stride
// the unfolded input alone. Empty where none applies (NCHW memory,
// inconsistent extents), and *why_not says why.
std::vector<GemmWgradForm> gemm_wgrad_forms(const ConvGraphShape& shape, std::string* why_not);

// Whether every GEMM operand of `form` starts 16-byte aligned, rows
// included (given 16-byte aligned x, dy and dW): dy's rows of K values (8
// divides K); for the shifted rows x's rows of C values and dW's blocks of C
// floats (8 divides C); the unfolded rows are padded to 8 values and dW's
// rows, where R S C floats are not a multiple of 4, staged at a padded
// pitch (ops/unfolded_gemm_wgrad.h). cuBLASLt's 16-bit GEMMs with an fp32
// output surely have an algorithm there, so a run may take the form untried;
// elsewhere only a timed run, which passes over a refusal.
bool gemm_wgrad_form_aligned(const ConvGraphShape& shape, GemmWgradForm form);

// A GEMM candidate's engine name: "cublasLt-gemm" (the shifted rows of a 1x1
// filter in place), else "cublasLt-shifted-gemm-RxS" or
// "cublasLt-unfolded-gemm-RxS" and the cap its chunks are planned within
// ("-256MiB": not their count, which depends on the batch, so that a batch
// that was not timed builds the timed one's choice by name), then "-algoN"
// for cuBLASLt's rank-N algorithm past the first.
std::string gemm_wgrad_engine_name(GemmWgradForm form, const ConvGraphShape& shape, bool in_place,
                                   std::size_t cap, int rank);
// Whether an engine name is one of these.
bool names_gemm_wgrad(const std::string& engine);
// `name` (an engine name, or one with more after it) with a GEMM's "-algoN"
// dropped: its first-algorithm twin, which another row count surely ranks;
// any other name as it is.
std::string gemm_wgrad_first_rank(const std::string& name);

}  // namespace ringtrain::detail
