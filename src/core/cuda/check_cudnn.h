// The check macro for cuDNN: throws a LibraryError with file:line and
// cuDNN's own error string. Internal: only code under */cuda/ includes it.
#pragma once

#include <cudnn.h>

#include <string>

#include "ringtrain/core/error.h"

#define RT_CUDNN_CHECK(call)                                                                  \
  do {                                                                                        \
    cudnnStatus_t rt_s_ = (call);                                                             \
    if (rt_s_ != CUDNN_STATUS_SUCCESS)                                                        \
      ::ringtrain::detail::throw_library_error(                                               \
          "cuDNN", __FILE__, __LINE__, std::string(#call ": ") + cudnnGetErrorString(rt_s_)); \
  } while (0)
