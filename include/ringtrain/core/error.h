// ringtrain::Error is what bad input throws: a missing file, a bad flag, a
// shape mismatch. It carries the place it was raised, and main() turns it into
// a fatal() so that every peer of the failing rank is released too.
#pragma once

#include <stdexcept>
#include <string>

namespace ringtrain {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A library (MPI, CUDA, NCCL, HDF5, cuBLAS, cuDNN) reported failure. The message
// holds file:line and the library's own error string.
class LibraryError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void throw_check_failed(const char* file, int line, const std::string& message);
[[noreturn]] void throw_library_error(const char* library, const char* file, int line,
                                      const std::string& library_message);
}  // namespace detail

}  // namespace ringtrain
