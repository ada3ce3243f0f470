#include "ringtrain/launch/library_versions.h"

#include <cblas.h>
#include <hdf5.h>
#include <mpi.h>

#include <fmt/format.h>

#include "ringtrain/config.h"

namespace ringtrain {

LibraryVersions library_versions() {
  LibraryVersions v;
  v.ringtrain = fmt::format("{} ({})", RINGTRAIN_VERSION, RINGTRAIN_CUDA ? "CUDA" : "CPU-only");
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MPI_Get_library_version(mpi, &len);
  std::string mpi_text(mpi, static_cast<std::size_t>(len));
  v.mpi = mpi_text.substr(0, mpi_text.find_first_of(",\n"));
  unsigned maj = 0, min = 0, rel = 0;
  H5get_libversion(&maj, &min, &rel);
  v.hdf5 = fmt::format("{}.{}.{}", maj, min, rel);
  v.openblas = openblas_get_config();
  v.gpu = gpu_library_versions();
  return v;
}

}  // namespace ringtrain
