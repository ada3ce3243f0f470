#include "apps/command.h"

namespace ringtrain::apps {

void add_device_options(CLI::App* sub, CommandContext& ctx, const char* default_device) {
  ctx.topology.device = parse_device_request(default_device);
  sub->add_option_function<std::string>(
         "--device",
         [&ctx](const std::string& value) { ctx.topology.device = parse_device_request(value); },
         "Device per rank: auto (a GPU if one is visible, else cpu), cpu, or cuda. A GPU rank "
         "takes local_rank % visible GPUs, honouring CUDA_VISIBLE_DEVICES")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->default_str(default_device);
  sub->add_flag("--allow-gpu-sharing", ctx.topology.allow_gpu_sharing,
                "Allow more ranks per node than visible GPUs (ranks then share a GPU)");
}

}  // namespace ringtrain::apps
