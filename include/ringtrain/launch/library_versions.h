// The versions of the libraries ringtrain was built against and runs with.
#pragma once

#include <string>

#include "ringtrain/launch/gpu_runtime.h"

namespace ringtrain {

struct LibraryVersions {
  std::string ringtrain;
  std::string mpi;
  std::string hdf5;
  std::string openblas;
  GpuLibraryVersions gpu;
};

LibraryVersions library_versions();

}  // namespace ringtrain
