// Whether the NCCL library loaded at run time can run code compiled against
// another NCCL's headers. Pure and backend-neutral, so that it is tested
// without NCCL. Internal to src/comm.
//
// Version codes are what NCCL_VERSION_CODE and ncclGetVersion give:
// major*10000 + minor*100 + patch since NCCL 2.9, major*1000 + minor*100 + patch
// before it.
//
// The rule: the loaded library has the compiled major version and at least the
// compiled minor one. A major release may change the ABI; within a major,
// NCCL adds API and ncclConfig_t fields in minor releases, and the code may
// use those of the minor it was compiled against (ncclCommInitRankConfig came
// in 2.14, for example). The patch level does not matter.
#pragma once

#include <string>

namespace ringtrain::comm_detail {

struct NcclVersion {
  int major = 0, minor = 0, patch = 0;
};
NcclVersion decode_nccl_version(int code);
std::string nccl_version_string(int code);  // "2.18.3"

struct NcclVersionCheck {
  bool ok = true;
  std::string message;  // "" when ok; otherwise names both versions and the fix
};
NcclVersionCheck nccl_version_compatible(int compiled, int loaded);

}  // namespace ringtrain::comm_detail
