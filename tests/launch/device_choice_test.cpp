#include <catch2/catch.hpp>

#include "ringtrain/core/error.h"
#include "ringtrain/launch/device_choice.h"

using namespace ringtrain;

namespace {
DeviceChoiceInput input(int local_rank, int local_size, int gpus,
                        DeviceRequest req = DeviceRequest::automatic) {
  DeviceChoiceInput in;
  in.request = req;
  in.local_rank = local_rank;
  in.local_size = local_size;
  in.visible_devices = gpus;
  in.host = "node-a";
  return in;
}
}  // namespace

TEST_CASE("no GPUs: auto and cpu choose the CPU, cuda is an error") {
  CHECK(choose_device(input(0, 2, 0)).device.is_cpu());
  CHECK(choose_device(input(1, 2, 0, DeviceRequest::cpu)).device.is_cpu());
  CHECK_THROWS_WITH(choose_device(input(0, 2, 0, DeviceRequest::cuda)),
                    Catch::Contains("--device cuda") && Catch::Contains("node-a"));
}

TEST_CASE("4 GPUs, 2 local ranks: rank i takes GPU i") {
  for (int r = 0; r < 2; ++r) {
    DeviceChoice c = choose_device(input(r, 2, 4));
    CHECK(c.device == Device::cuda(r));
    CHECK_FALSE(c.shared);
    CHECK(c.physical_label == std::to_string(r));
  }
}

TEST_CASE("--device cpu wins over visible GPUs") {
  CHECK(choose_device(input(1, 2, 4, DeviceRequest::cpu)).device.is_cpu());
}

TEST_CASE("2 GPUs, 3 local ranks: error unless sharing is allowed") {
  CHECK_THROWS_WITH(choose_device(input(2, 3, 2)),
                    Catch::Contains("3 ranks on host node-a") &&
                        Catch::Contains("--allow-gpu-sharing"));
  DeviceChoiceInput in = input(2, 3, 2);
  in.allow_gpu_sharing = true;
  DeviceChoice c = choose_device(in);
  CHECK(c.device == Device::cuda(0));  // 2 % 2
  CHECK(c.shared);
}

TEST_CASE("CUDA_VISIBLE_DEVICES limits and relabels devices") {
  CHECK(parse_cuda_visible_devices("1,3") == std::vector<std::string>{"1", "3"});
  CHECK(parse_cuda_visible_devices("").empty());
  CHECK(parse_cuda_visible_devices("2,-1,3") == std::vector<std::string>{"2"});
  CHECK(parse_cuda_visible_devices("GPU-abc, 4") == std::vector<std::string>{"GPU-abc", "4"});
  CHECK(visible_device_count(8, std::string("1,3")) == 2);
  CHECK(visible_device_count(8, std::string("")) == 0);
  CHECK(visible_device_count(8, std::nullopt) == 8);
  CHECK(visible_device_count(1, std::string("0,1,2")) == 1);

  DeviceChoiceInput in = input(1, 2, visible_device_count(8, std::string("5,7")));
  in.cuda_visible_devices = "5,7";
  DeviceChoice c = choose_device(in);
  CHECK(c.device == Device::cuda(1));
  CHECK(c.physical_label == "7");

  // An empty CUDA_VISIBLE_DEVICES hides every GPU: auto falls back to CPU.
  DeviceChoiceInput hidden = input(0, 1, visible_device_count(8, std::string("")));
  hidden.cuda_visible_devices = "";
  CHECK(choose_device(hidden).device.is_cpu());
}

TEST_CASE("device request parsing names the flag") {
  CHECK(parse_device_request("auto") == DeviceRequest::automatic);
  CHECK(parse_device_request("cuda") == DeviceRequest::cuda);
  CHECK_THROWS_WITH(parse_device_request("tpu"), Catch::Contains("--device") && Catch::Contains("tpu"));
}
