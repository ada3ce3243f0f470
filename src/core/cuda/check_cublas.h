// The check macro for cuBLAS: throws a LibraryError with file:line and
// cuBLAS's own error string. Internal: only code under */cuda/ includes it.
#pragma once

#include <cublas_v2.h>

#include <string>

#include "ringtrain/core/error.h"

#define RT_CUBLAS_CHECK(call)                                                                    \
  do {                                                                                           \
    cublasStatus_t rt_s_ = (call);                                                               \
    if (rt_s_ != CUBLAS_STATUS_SUCCESS)                                                          \
      ::ringtrain::detail::throw_library_error(                                                  \
          "cuBLAS", __FILE__, __LINE__, std::string(#call ": ") + cublasGetStatusString(rt_s_)); \
  } while (0)
