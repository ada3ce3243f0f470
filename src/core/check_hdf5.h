// RT_H5_CHECK(call, what): HDF5 calls return a negative value on failure. The
// message names `what` (a file, group or dataset) and HDF5's innermost error
// description from its error stack.
#pragma once

#include <hdf5.h>

#include <string>

#include "ringtrain/core/error.h"

namespace ringtrain::detail {
std::string hdf5_error_string();
}  // namespace ringtrain::detail

#define RT_H5_CHECK(call, what)                                                           \
  ([&]() {                                                                                \
    auto rt_h5_rc_ = (call);                                                              \
    if (rt_h5_rc_ < 0)                                                       \
      ::ringtrain::detail::throw_library_error(                                           \
          "HDF5", __FILE__, __LINE__,                                                     \
          std::string(what) + ": " + ::ringtrain::detail::hdf5_error_string());           \
    return rt_h5_rc_;                                                                     \
  }())
