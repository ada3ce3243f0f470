// Open MPI's shared-memory transport copies large messages once, straight
// between processes (CMA, process_vm_readv), when the kernel lets it; where a
// container's seccomp policy forbids that call, the transport fails mid-job.
// Internal to the launch layer.
#pragma once

namespace ringtrain {

// True when this process may use process_vm_readv (a read of its own memory:
// seccomp filters by system call, not by target).
bool single_copy_allowed();

// Before MPI_Init: when the user has not chosen a single-copy mechanism and
// single copy is forbidden here, select Open MPI's copy-in/copy-out path
// instead (OMPI_MCA_btl_vader_single_copy_mechanism=none). Other MPI
// libraries ignore the variable.
void choose_single_copy_mechanism();

}  // namespace ringtrain
