// ringtrain::Error is what bad input throws: a missing file, a bad flag, a
// shape mismatch. what() is the message a user reads; where() is the place in
// the source that raised it (RT_CHECK's file:line), kept apart so that no
// message opens with a source path ("convert: skipped src/data/...cpp:303:")
// while tests and debuggers can still find the check. main() turns an Error
// into a fatal() so that every peer of the failing rank is released too.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace ringtrain {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what, std::string where = {})
      : std::runtime_error(what), where_(std::move(where)) {}
  // "src/data/dataset.cpp:303", or empty when no check in the code raised it.
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// A library (MPI, CUDA, NCCL, HDF5, cuBLAS, cuDNN) reported failure. The message
// holds the library's own error string; where() the call that failed.
class LibraryError : public Error {
 public:
  explicit LibraryError(const std::string& what, std::string library = {}, std::string where = {})
      : Error(what, std::move(where)), library_(std::move(library)) {}
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
