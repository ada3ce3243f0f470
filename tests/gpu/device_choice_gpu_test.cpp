// On the GPUs that are there: every visible device has a distinct physical id
// ("GPU-" and its UUID, or "PCI-" and its bus id), and Topology::discover with
// --device cuda on one rank takes ordinal 0 and reports that id. Exits 77
// (ctest: skipped) without CUDA or a device; fails on a driver problem.
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/launch/topology.h"
#include "tests/support/gpu_test.h"

int main(int argc, char** argv) {
  using namespace ringtrain;
  if (!test::cuda_device_available()) return test::kSkippedExitCode;
  int bad = 0;
  auto expect = [&bad](bool ok, const std::string& what) {
    if (!ok) {
      std::printf("FAILED: %s\n", what.c_str());
      ++bad;
    }
  };
  const std::vector<std::string> ids = cuda_visible_device_uuids();
  expect(static_cast<int>(ids.size()) == cuda_probe().count, "one physical id per visible device");
  for (const auto& id : ids) {
    std::printf("visible: %s\n", id.c_str());
    const bool uuid = id.rfind("GPU-", 0) == 0 && id.size() == 40;  // GPU- and 8-4-4-4-12 hex
    expect(uuid || id.rfind("PCI-", 0) == 0, "id '" + id + "' is GPU-<uuid> or PCI-<bus id>");
  }
  expect(std::set<std::string>(ids.begin(), ids.end()).size() == ids.size(), "ids are distinct");

  MpiSession mpi(&argc, &argv);
  try {
    Topology topo = Topology::discover({DeviceRequest::cuda, false});
    std::fputs(topo.table().c_str(), stdout);
    if (topo.local_size() == 1) {
      expect(topo.device() == Device::cuda(0), "one rank takes ordinal 0");
      expect(!ids.empty() && topo.device_choice().uuid == ids[0],
             "the choice carries the device's id");
      expect(!topo.device_choice().shared, "one rank does not share");
    }
  } catch (const std::exception& e) {
    expect(false, e.what());
  }
  std::printf("%d check(s) failed\n", bad);
  return bad == 0 ? 0 : 1;
}
