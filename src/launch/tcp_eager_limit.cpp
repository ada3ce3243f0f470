#include "launch/tcp_eager_limit.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace ringtrain {

std::size_t tcp_eager_limit_for(std::size_t chunk_bytes) {
  // Open MPI's limit counts its match and transport headers (tens of bytes).
  constexpr std::size_t kHeaderRoom = 1024;
  constexpr std::size_t kOpenMpiDefault = std::size_t{64} << 10;
  return std::max(kOpenMpiDefault, chunk_bytes + kHeaderRoom);
}

void choose_tcp_eager_limit(std::size_t chunk_bytes) {
  const char* name = "OMPI_MCA_btl_tcp_eager_limit";
  if (std::getenv(name) != nullptr) return;  // the user's (or job script's) choice stands
  setenv(name, std::to_string(tcp_eager_limit_for(chunk_bytes)).c_str(), 0);
}

}  // namespace ringtrain
