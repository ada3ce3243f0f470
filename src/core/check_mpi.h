// RT_MPI_CHECK(call): on failure, throws LibraryError with file:line and MPI's
// own error string. Internal: public headers never see mpi.h.
#pragma once

#include <mpi.h>

#include <string>

#include "ringtrain/core/error.h"

namespace ringtrain::detail {
inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<std::size_t>(len));
}
}  // namespace ringtrain::detail

#define RT_MPI_CHECK(call)                                                 \
  do {                                                                     \
    int rt_mpi_rc_ = (call);                                               \
    if (rt_mpi_rc_ != MPI_SUCCESS)                                         \
      ::ringtrain::detail::throw_library_error(                            \
          "MPI", __FILE__, __LINE__,                                       \
          #call ": " + ::ringtrain::detail::mpi_error_string(rt_mpi_rc_)); \
  } while (0)
