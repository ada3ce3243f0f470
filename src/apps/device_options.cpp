#include "apps/command.h"

namespace ringtrain::apps {

void add_device_options(CLI::App* sub, CommandContext& ctx, const char* default_device) {
  ctx.topology.device = parse_device_request(default_device);
  sub->add_option_function<std::string>(
         "--device",
         [&ctx](const std::string& value) { ctx.topology.device = parse_device_request(value); },
         "Device per rank: auto (a GPU if one is visible, else cpu), cpu, or cuda. A GPU rank "
         "takes local_rank % the GPUs it sees, honouring CUDA_VISIBLE_DEVICES; two ranks of a node "
         "on one physical GPU is an error")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->default_str(default_device);
  sub->add_flag("--allow-gpu-sharing", ctx.topology.allow_gpu_sharing,
                "Allow several ranks of a node on one physical GPU (they then share it)");
}

void add_precision_option(CLI::App* sub, std::string& value) {
  sub->add_option("--precision", value,
                  "fp32, or bf16/fp16: the weights of convolutions and linear layers, every "
                  "activation stored in 16 bits, accumulation and norms in fp32 "
                  "(docs/precision.md); a training run evaluates in its own --precision")
      ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
      ->capture_default_str();
}

void add_layout_option(CLI::App* sub, std::string& value) {
  sub->add_option("--layout", value,
                  "auto, nchw or nhwc: the memory order of [C, H, W] activations. nhwc "
                  "(channels-last) is what cuDNN's tensor-core convolutions read; weights, "
                  "checkpoints and the data stay NCHW (the model transposes its input once, on "
                  "its device). auto: nhwc for a convolutional model on a GPU in bf16/fp16 or "
                  "with TF32 convolutions (the default --tf32), nchw otherwise (docs/layout.md)")
      ->check(CLI::IsMember({"auto", "nchw", "nhwc"}))
      ->capture_default_str();
}

void add_fuse_option(CLI::App* sub, std::string& value) {
  sub->add_option("--fuse", value,
                  "on or off: BatchNorm + ReLU, BatchNorm + add + ReLU and conv + bias + ReLU "
                  "run as one node where the intermediate has no other reader (a ResNet's "
                  "blocks, VGG's and cnn's convolutions), and a gpt residual add with the "
                  "LayerNorm that reads its sum: the same bits either way. On a GPU under "
                  "bf16/fp16 it also runs gpt's linear + GELU (and its backward) as one "
                  "cuBLASLt GEMM each, which rounds the pre-activation once less. Off keeps "
                  "the unfused plan, the reference it is tested against (docs/precision.md)")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
}

void add_tf32_option(CLI::App* sub, std::string& value) {
  sub->add_option(
         "--tf32", value,
         "TF32 tensor cores for float math on GPUs from Ampere on (inputs rounded to a 10-bit "
         "mantissa, float accumulation). default: PyTorch's defaults, so that speed comparisons "
         "are like for like: convolutions may use TF32 (torch.backends.cudnn.allow_tf32 = True), "
         "GEMMs stay fp32 (torch.backends.cuda.matmul.allow_tf32 = False since PyTorch 1.12). "
         "on: both use TF32 (faster Linear layers, about 1e-3 relative error). off: neither "
         "(plain fp32, closest to the CPU). No effect on the CPU")
      ->check(CLI::IsMember({"default", "on", "off"}))
      ->capture_default_str();
}

}  // namespace ringtrain::apps
