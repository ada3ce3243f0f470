// Which device a rank uses. The choice is a pure function of the request, the
// rank's place on its node and the GPUs that every rank of the node can see, so
// that it is tested without GPUs. It runs before any CUDA context or NCCL
// communicator exists.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ringtrain/core/device.h"
#include "ringtrain/launch/gpu_runtime.h"

namespace ringtrain {

enum class DeviceRequest { automatic, cpu, cuda };

// "auto" | "cpu" | "cuda"; throws Error naming the flag and the value.
DeviceRequest parse_device_request(std::string_view text);
std::string_view device_request_name(DeviceRequest r);

// The entries of CUDA_VISIBLE_DEVICES, as the CUDA runtime reads them: a comma
// separated list that ends at the first invalid entry (e.g. "-1"). Entries may
// be ordinals, GPU-UUIDs or MIG ids.
std::vector<std::string> parse_cuda_visible_devices(std::string_view value);

// ---------------------------------------------------------------------------
// Is there a GPU at all? A driver problem must not pass for "no GPU".
// ---------------------------------------------------------------------------

// The nodes the NVIDIA driver creates where there are GPUs: /dev/nvidiactl and
// /dev/nvidia0.
const std::vector<std::string>& nvidia_device_node_paths();
// True when any of `paths` exists (injectable for tests).
bool nvidia_device_nodes_present(
    const std::vector<std::string>& paths = nvidia_device_node_paths());

// What a CudaProbe (gpu_runtime.h) means. The rule:
//  - the runtime answered (probe.error empty; cudaErrorNoDevice counts as an
//    answer): `count` GPUs, possibly 0, which --device auto takes as "use the CPU";
//  - it failed and NVIDIA device nodes exist: the machine has GPUs that CUDA
//    cannot use (driver older than the runtime, a failed init, ...): `fatal`,
//    for --device auto as for cuda, with the CUDA error in `problem`. Training
//    on the CPU instead would hide the broken GPU;
//  - it failed and there are no device nodes: a machine without GPUs, typically
//    without a driver (the static runtime says cudaErrorInsufficientDriver):
//    0 GPUs, with the CUDA error in `problem`, which --device auto prints once
//    as a warning before it uses the CPU, and --device cuda puts in its error.
struct CudaAssessment {
  int count = 0;
  bool fatal = false;
  std::string problem;  // "" when the runtime answered
};
CudaAssessment assess_cuda_probe(const CudaProbe& probe, bool device_nodes_present);

// ---------------------------------------------------------------------------
// Which GPU: by physical id, compared across the ranks of a node.
// ---------------------------------------------------------------------------

struct DeviceChoiceInput {
  DeviceRequest request = DeviceRequest::automatic;
  int local_rank = 0;
  // Element i: the physical ids (cuda_visible_device_uuids) that local rank i
  // sees, in its CUDA ordinal order, all-gathered over the node. Its size is
  // the local size. Ranks may see different devices (Slurm --gpus-per-task,
  // CUDA_VISIBLE_DEVICES per rank) or the same ones (all GPUs visible).
  std::vector<std::vector<std::string>> visible;
  bool allow_gpu_sharing = false;
  std::optional<std::string> cuda_visible_devices;  // this rank's, for the label
  std::string host;                                 // for error messages
  std::string no_gpu_reason;  // why this rank sees no GPU, when known (a CUDA error)
};

struct DeviceChoice {
  Device device;
  // What the user knows the GPU as: this rank's CUDA_VISIBLE_DEVICES entry for
  // the chosen ordinal, or the ordinal itself; "-" on CPU.
  std::string physical_label = "-";
  std::string uuid;  // the chosen GPU's physical id; "" on CPU
  // The local ranks that use this rank's GPU, this one included, ascending;
  // empty on CPU. More than one only with allow_gpu_sharing.
  std::vector<int> gpu_local_ranks;
  bool shared = false;  // gpu_local_ranks.size() > 1
};

// --device cpu: the CPU. Otherwise local rank r takes ordinal
// r % (GPUs r sees) among the GPUs it sees: the one GPU where it sees one (Slurm
// --gpus-per-task=1), local_rank % count where every rank sees all. Then the
// chosen physical ids of all local ranks are compared:
//  - two ranks on one physical GPU is an Error naming both and the GPU, unless
//    allow_gpu_sharing (then shared = true);
//  - no rank sees a GPU: auto uses the CPU, cuda is an Error naming the host;
//  - some ranks see GPUs and others none is an Error (the job would mix CPU and
//    GPU ranks).
// Every local rank computes the same node-wide verdict, so all of them fail
// together.
DeviceChoice choose_device(const DeviceChoiceInput& in);

}  // namespace ringtrain
