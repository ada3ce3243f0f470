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

}  // namespace ringtrain::apps
