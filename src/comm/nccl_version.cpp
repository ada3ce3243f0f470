#include "comm/nccl_version.h"

#include <fmt/format.h>

namespace ringtrain::comm_detail {

NcclVersion decode_nccl_version(int code) {
  if (code >= 10000) return {code / 10000, (code / 100) % 100, code % 100};
  return {code / 1000, (code / 100) % 10, code % 100};
}

std::string nccl_version_string(int code) {
  const NcclVersion v = decode_nccl_version(code);
  return fmt::format("{}.{}.{}", v.major, v.minor, v.patch);
}

NcclVersionCheck nccl_version_compatible(int compiled, int loaded) {
  const NcclVersion c = decode_nccl_version(compiled), l = decode_nccl_version(loaded);
  if (l.major == c.major && l.minor >= c.minor) return {};
  return {false, fmt::format(
                     "the loaded NCCL library is {} but ringtrain was compiled against NCCL {}: it "
                     "needs NCCL {}.x with x >= {}; put a matching libnccl.so.{} first on "
                     "LD_LIBRARY_PATH, or rebuild ringtrain against the installed NCCL",
                     nccl_version_string(loaded), nccl_version_string(compiled), c.major, c.minor,
                     c.major)};
}

}  // namespace ringtrain::comm_detail
