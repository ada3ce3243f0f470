#include "core/check_hdf5.h"

namespace ringtrain::detail {

namespace {
herr_t keep_innermost(unsigned n, const H5E_error2_t* err, void* out) {
  // Walking upward starts at the innermost frame, where the error was
  // detected: the most specific description ("truncated file", "bad symbol
  // table" ...) rather than the API's generic "unable to open file".
  auto* text = static_cast<std::string*>(out);
  if (n == 0 && err->desc) *text = err->desc;
  return 0;
}
}  // namespace

std::string hdf5_error_string() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, keep_innermost, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? std::string("HDF5 call failed") : text;
}

}  // namespace ringtrain::detail
