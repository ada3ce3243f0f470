// TF32 on GPUs from Ampere on: float convolutions and GEMMs may round their
// inputs to TF32 (10-bit mantissa) and run on tensor cores, accumulating in
// float. Tf32Mode::pytorch_default follows PyTorch's defaults: cuDNN
// convolutions allow TF32 (torch.backends.cudnn.allow_tf32 = True), matmuls
// do not (torch.backends.cuda.matmul.allow_tf32 = False since PyTorch 1.12).
// `on` allows both, `off` neither (plain float FMA: what the GPU-vs-CPU tests
// use, so they keep tight tolerances). The CPU path ignores it.
#pragma once

#include <string_view>

namespace ringtrain {

enum class Tf32Mode { pytorch_default, on, off };

constexpr bool tf32_for_convolutions(Tf32Mode m) {
  return m != Tf32Mode::off;
}
constexpr bool tf32_for_gemm(Tf32Mode m) {
  return m == Tf32Mode::on;
}

// "default", "on" or "off" (the --tf32 flag); an Error naming the flag otherwise.
Tf32Mode parse_tf32_mode(std::string_view text);
// "default", "on", "off".
const char* tf32_mode_name(Tf32Mode m);
// "conv tf32, gemm fp32" and the like, for start-up lines.
const char* tf32_mode_summary(Tf32Mode m);

}  // namespace ringtrain
