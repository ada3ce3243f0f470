// The CPU-only build's answer for the nccl backend.
#include "comm/backends.h"
#include "ringtrain/core/check.h"

namespace ringtrain::comm_detail {

bool nccl_compiled() {
  return false;
}

std::unique_ptr<Communicator> make_nccl_communicator(const Topology&, const CommOptions&) {
  RT_CHECK(false,
           "--backend nccl: this ringtrain was built without CUDA (configure with "
           "-DRINGTRAIN_CUDA=ON on a machine with the CUDA toolkit and NCCL); CPU backends: shm, "
           "ring, mpi");
}

std::unique_ptr<Communicator> make_staged_communicator(std::string_view inner_kind, const Topology&,
                                                       const CommOptions&) {
  RT_CHECK(false, "--backend {} for GPU ranks: this ringtrain was built without CUDA", inner_kind);
}

}  // namespace ringtrain::comm_detail
