// The device choice as a pure function: what every local rank of a node sees,
// in the shapes that launchers produce, without a GPU.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "ringtrain/core/error.h"
#include "ringtrain/launch/device_choice.h"

using namespace ringtrain;
using Lists = std::vector<std::vector<std::string>>;

namespace {
std::string uuid(int i) {
  return "GPU-" + std::to_string(1000 + i) + "aaaa-bbbb-cccc-dddd-eeeeffff0000";
}

// Every one of `ranks` local ranks sees the same `gpus` devices (all visible).
Lists all_see(int ranks, int gpus) {
  std::vector<std::string> ids;
  for (int g = 0; g < gpus; ++g) ids.push_back(uuid(g));
  return Lists(static_cast<std::size_t>(ranks), ids);
}

DeviceChoiceInput input(int local_rank, Lists visible,
                        DeviceRequest req = DeviceRequest::automatic) {
  DeviceChoiceInput in;
  in.request = req;
  in.local_rank = local_rank;
  in.visible = std::move(visible);
  in.host = "node-a";
  return in;
}
}  // namespace

TEST_CASE("no GPUs: auto and cpu choose the CPU, cuda is an error naming the host") {
  CHECK(choose_device(input(0, all_see(2, 0))).device.is_cpu());
  CHECK(choose_device(input(1, all_see(2, 0), DeviceRequest::cpu)).device.is_cpu());
  CHECK_THROWS_WITH(choose_device(input(0, all_see(2, 0), DeviceRequest::cuda)),
                    Catch::Contains("--device cuda") && Catch::Contains("node-a"));
  DeviceChoiceInput why = input(0, all_see(1, 0), DeviceRequest::cuda);
  why.no_gpu_reason = "cudaErrorInsufficientDriver: no driver";
  CHECK_THROWS_WITH(choose_device(why), Catch::Contains("cudaErrorInsufficientDriver"));
}

TEST_CASE("--device cpu wins over visible GPUs") {
  DeviceChoice c = choose_device(input(1, all_see(2, 4), DeviceRequest::cpu));
  CHECK(c.device.is_cpu());
  CHECK(c.physical_label == "-");
  CHECK(c.gpu_local_ranks.empty());
}

TEST_CASE("gpus-per-node=8: 8 ranks see the same 8 GPUs, rank i takes GPU i") {
  for (int r = 0; r < 8; ++r) {
    DeviceChoice c = choose_device(input(r, all_see(8, 8)));
    CHECK(c.device == Device::cuda(r));
    CHECK(c.uuid == uuid(r));
    CHECK(c.physical_label == std::to_string(r));
    CHECK_FALSE(c.shared);
    CHECK(c.gpu_local_ranks == std::vector<int>{r});
  }
}

TEST_CASE("gpus-per-task=1: 8 ranks each see one distinct GPU as ordinal 0") {
  Lists lists;
  for (int r = 0; r < 8; ++r) lists.push_back({uuid(r)});
  for (int r = 0; r < 8; ++r) {
    DeviceChoice c = choose_device(input(r, lists, DeviceRequest::cuda));
    CHECK(c.device == Device::cuda(0));
    CHECK(c.uuid == uuid(r));
    CHECK_FALSE(c.shared);
  }
}

TEST_CASE("CUDA_VISIBLE_DEVICES per rank: each rank sees a different single ordinal") {
  Lists lists = {{uuid(3)}, {uuid(1)}};
  DeviceChoiceInput in = input(0, lists);
  in.cuda_visible_devices = "3";
  DeviceChoice c0 = choose_device(in);
  CHECK(c0.device == Device::cuda(0));
  CHECK(c0.physical_label == "3");
  CHECK(c0.uuid == uuid(3));
  in = input(1, lists);
  in.cuda_visible_devices = "1";
  DeviceChoice c1 = choose_device(in);
  CHECK(c1.device == Device::cuda(0));
  CHECK(c1.physical_label == "1");
  CHECK_FALSE(c1.shared);
}

TEST_CASE("UUID and MIG entries in CUDA_VISIBLE_DEVICES label the GPU") {
  const std::string gpu = "GPU-5d3e0f1a-7b2c-4d8e-9f01-23456789abcd";
  const std::string mig = "MIG-0a1b2c3d-4e5f-6071-8293-a4b5c6d7e8f9";
  Lists lists = {{gpu, mig}, {gpu, mig}};
  DeviceChoiceInput in = input(0, lists);
  in.cuda_visible_devices = gpu + "," + mig;
  DeviceChoice c0 = choose_device(in);
  CHECK(c0.device == Device::cuda(0));
  CHECK(c0.physical_label == gpu);
  in.local_rank = 1;
  DeviceChoice c1 = choose_device(in);
  CHECK(c1.device == Device::cuda(1));
  CHECK(c1.physical_label == mig);
  CHECK(c1.uuid == mig);
}

TEST_CASE("3 ranks on 2 GPUs: an error naming both ranks and the GPU, unless sharing") {
  for (int r = 0; r < 3; ++r)
    CHECK_THROWS_WITH(choose_device(input(r, all_see(3, 2))),
                      Catch::Contains("local ranks 0 and 2 on host node-a") &&
                          Catch::Contains(uuid(0)) && Catch::Contains("--allow-gpu-sharing"));
  DeviceChoiceInput in = input(2, all_see(3, 2));
  in.allow_gpu_sharing = true;
  DeviceChoice c2 = choose_device(in);
  CHECK(c2.device == Device::cuda(0));  // 2 % 2
  CHECK(c2.shared);
  CHECK(c2.gpu_local_ranks == std::vector<int>{0, 2});
  in.local_rank = 1;
  DeviceChoice c1 = choose_device(in);
  CHECK(c1.device == Device::cuda(1));
  CHECK_FALSE(c1.shared);
  CHECK(c1.gpu_local_ranks == std::vector<int>{1});
}

TEST_CASE("2 ranks each see one GPU, but the same one: an error unless sharing") {
  Lists lists = {{uuid(5)}, {uuid(5)}};
  CHECK_THROWS_WITH(choose_device(input(1, lists)),
                    Catch::Contains("local ranks 0 and 1") && Catch::Contains(uuid(5)));
  DeviceChoiceInput in = input(1, lists);
  in.allow_gpu_sharing = true;
  DeviceChoice c = choose_device(in);
  CHECK(c.device == Device::cuda(0));
  CHECK(c.shared);
  CHECK(c.gpu_local_ranks == std::vector<int>{0, 1});
}

TEST_CASE("some ranks of a node see GPUs and others none: an error naming both") {
  Lists lists = {{uuid(0)}, {}};
  for (int r = 0; r < 2; ++r)
    CHECK_THROWS_WITH(
        choose_device(input(r, lists)),
        Catch::Contains("local rank 1 on host node-a sees no GPU while local rank 0 sees 1"));
  CHECK(choose_device(input(1, lists, DeviceRequest::cpu)).device.is_cpu());
}

TEST_CASE("CUDA_VISIBLE_DEVICES parsing") {
  CHECK(parse_cuda_visible_devices("1,3") == std::vector<std::string>{"1", "3"});
  CHECK(parse_cuda_visible_devices("").empty());
  CHECK(parse_cuda_visible_devices("2,-1,3") == std::vector<std::string>{"2"});
  CHECK(parse_cuda_visible_devices("GPU-abc, 4") == std::vector<std::string>{"GPU-abc", "4"});
  CHECK(parse_cuda_visible_devices("MIG-x,GPU-y") == std::vector<std::string>{"MIG-x", "GPU-y"});

  // The label follows the entry of the chosen ordinal.
  DeviceChoiceInput in = input(1, all_see(2, 2));
  in.cuda_visible_devices = "5,7";
  DeviceChoice c = choose_device(in);
  CHECK(c.device == Device::cuda(1));
  CHECK(c.physical_label == "7");
}

TEST_CASE("a CUDA error is 'no GPU' only where no NVIDIA device node exists") {
  const CudaProbe ok{2, ""}, none{0, ""}, broken{0, "cudaErrorInsufficientDriver: driver too old"};
  CHECK(assess_cuda_probe(ok, true).count == 2);
  CHECK_FALSE(assess_cuda_probe(ok, true).fatal);
  CHECK(assess_cuda_probe(none, true).count == 0);
  CHECK_FALSE(assess_cuda_probe(none, true).fatal);
  CHECK(assess_cuda_probe(none, true).problem.empty());

  CudaAssessment gpu_host = assess_cuda_probe(broken, true);
  CHECK(gpu_host.fatal);
  CHECK(gpu_host.count == 0);
  CHECK_THAT(gpu_host.problem,
             Catch::Contains("cudaErrorInsufficientDriver") && Catch::Contains("/dev/nvidiactl"));

  CudaAssessment cpu_host = assess_cuda_probe(broken, false);
  CHECK_FALSE(cpu_host.fatal);
  CHECK(cpu_host.count == 0);
  CHECK_THAT(cpu_host.problem,
             Catch::Contains("cudaErrorInsufficientDriver") && Catch::Contains("no GPU"));
}

TEST_CASE("NVIDIA device nodes: any listed path that exists") {
  const auto dir = std::filesystem::temp_directory_path() / "ringtrain_device_nodes_test";
  std::filesystem::create_directories(dir);
  const std::string present = (dir / "nvidiactl").string(), absent = (dir / "nvidia0").string();
  std::ofstream(present).put('\n');
  std::filesystem::remove(absent);
  CHECK(nvidia_device_nodes_present({absent, present}));
  CHECK_FALSE(nvidia_device_nodes_present({absent}));
  CHECK_FALSE(nvidia_device_nodes_present({}));
  std::filesystem::remove_all(dir);
  CHECK(nvidia_device_node_paths() == std::vector<std::string>{"/dev/nvidiactl", "/dev/nvidia0"});
}

TEST_CASE("device request parsing names the flag") {
  CHECK(parse_device_request("auto") == DeviceRequest::automatic);
  CHECK(parse_device_request("cuda") == DeviceRequest::cuda);
  CHECK_THROWS_WITH(parse_device_request("tpu"),
                    Catch::Contains("--device") && Catch::Contains("tpu"));
}
