// The check macro for NCCL (ncclInProgress, a non-blocking communicator's
// "not yet", is not an error): throws a LibraryError with file:line and
// NCCL's own error string. Internal: only code under */cuda/ includes it.
#pragma once

#include <nccl.h>

#include <string>

#include "ringtrain/core/error.h"

#define RT_NCCL_CHECK(call)                                                                 \
  do {                                                                                      \
    ncclResult_t rt_r_ = (call);                                                            \
    if (rt_r_ != ncclSuccess && rt_r_ != ncclInProgress)                                    \
      ::ringtrain::detail::throw_library_error(                                             \
          "NCCL", __FILE__, __LINE__, std::string(#call ": ") + ncclGetErrorString(rt_r_)); \
  } while (0)
