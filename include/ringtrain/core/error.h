// ringtrain::Error is what bad input throws: a missing file, a bad flag, a
// shape mismatch. It carries the place it was raised, and main() turns it into
// a fatal() so that every peer of the failing rank is released too.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace ringtrain {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A library (MPI, CUDA, NCCL, HDF5, cuBLAS, cuDNN) reported failure. The message
// holds file:line and the library's own error string.
class LibraryError : public Error {
 public:
  explicit LibraryError(const std::string& what, std::string library = {})
      : Error(what), library_(std::move(library)) {}
  // "MPI", "CUDA", "NCCL", "HDF5", ...
  const std::string& library() const { return library_; }
  // HDF5 fails on what it reads or writes: a damaged or foreign file given as
  // input is the input's fault, not the machine's.
  bool about_a_file() const { return library_ == "HDF5"; }

 private:
  std::string library_;
};

// A file or directory that exists but that this user may not read or write:
// said as such (not "corrupt", not "no such file"), and never skipped over as
// if it were damaged.
class PermissionError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void throw_check_failed(const char* file, int line, const std::string& message);
[[noreturn]] void throw_library_error(const char* library, const char* file, int line,
                                      const std::string& library_message);
}  // namespace detail

}  // namespace ringtrain
