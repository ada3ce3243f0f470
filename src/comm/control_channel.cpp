#include "ringtrain/comm/control_channel.h"

#include "comm/backends.h"

namespace ringtrain {

std::unique_ptr<Communicator> make_control_communicator(const Topology& topology,
                                                        const CommOptions& options) {
  // Host buffers only, whatever device the rank trains on.
  return comm_detail::make_mpi_communicator(topology, options);
}

}  // namespace ringtrain
