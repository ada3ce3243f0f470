// Bad input found while a job sets up (its flags, data, model or checkpoint):
// the job ends with kInputErrorExitCode, which tells a wrapper that restarts
// failed jobs (launch/ringtrain-mpirun --max-restarts) that a retry would fail
// the same way. Other fatal errors (a lost peer, a timeout, a device failure)
// end with kFatalExitCode.
#pragma once

#include "ringtrain/core/error.h"

namespace ringtrain {

// Also what a flag that does not parse exits with.
inline constexpr int kInputErrorExitCode = 2;

class InputError : public Error {
 public:
  using Error::Error;
};

// Runs f; an Error it throws is rethrown as an InputError with the same
// message, except a LibraryError of MPI or a device (no input's fault). An
// HDF5 error here is about a file the job was given (a damaged checkpoint).
template <typename F>
void as_input_error(F&& f) {
  try {
    f();
  } catch (const LibraryError& e) {
    if (e.about_a_file()) throw InputError(e.what(), e.where());
    throw;
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(e.what(), e.where());
  }
}

}  // namespace ringtrain
