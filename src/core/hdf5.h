// The one HDF5 module, for data sets, checkpoints and evaluation: owning
// handles per kind of hid_t, attribute helpers, error messages, and the lock
// that serialises HDF5 calls. Debian's serial HDF5 is built without thread
// safety, and the prefetcher reads on its own thread while the trainer writes
// checkpoints: every HDF5 call sequence holds library_mutex(). Internal:
// public headers never see hdf5.h.
#pragma once

#include <hdf5.h>

#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ringtrain/core/error.h"

namespace ringtrain::detail {
// HDF5's innermost error description from its error stack ("truncated file",
// "data error detected by Fletcher32 checksum"), then clears the stack.
std::string hdf5_error_string();
}  // namespace ringtrain::detail

// RT_H5_CHECK(call, what): HDF5 calls return a negative value on failure. The
// message names `what` (a file, group or dataset) and HDF5's innermost error.
#define RT_H5_CHECK(call, what)                                                 \
  ([&]() {                                                                      \
    auto rt_h5_rc_ = (call);                                                    \
    if (rt_h5_rc_ < 0)                                                          \
      ::ringtrain::detail::throw_library_error(                                 \
          "HDF5", __FILE__, __LINE__,                                           \
          std::string(what) + ": " + ::ringtrain::detail::hdf5_error_string()); \
    return rt_h5_rc_;                                                           \
  }())

namespace ringtrain::h5 {

// Held around every HDF5 call sequence (data sets, checkpoints, evaluation).
std::recursive_mutex& library_mutex();
// Turns off HDF5's own error printing, once: failures become Error messages
// naming the file, split and dataset instead of a stack dump on every rank.
void quiet_errors();

template <herr_t (*Close)(hid_t)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, H5I_INVALID_HID)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = std::exchange(o.id_, H5I_INVALID_HID);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0) Close(id_);
    id_ = H5I_INVALID_HID;
  }
  // Closes now and returns the result (H5Fclose is where buffered data is
  // flushed, so a checkpoint writer must see its failure).
  herr_t close() {
    const herr_t rc = id_ >= 0 ? Close(id_) : 0;
    id_ = H5I_INVALID_HID;
    return rc;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

using File = Handle<H5Fclose>;
using Group = Handle<H5Gclose>;
using DataSet = Handle<H5Dclose>;
using Space = Handle<H5Sclose>;
using Type = Handle<H5Tclose>;
using Attr = Handle<H5Aclose>;
using PropList = Handle<H5Pclose>;
using Object = Handle<H5Oclose>;

// Whether `name` exists directly under `loc` (a link of any kind).
bool link_exists(hid_t loc, const std::string& name);
// The names of the groups directly under `loc`, for "splits present" messages.
std::vector<std::string> child_groups(hid_t loc);

bool has_attr(hid_t obj, const std::string& name);
// Attribute readers: nullopt when absent; Error naming `what` on a bad type.
std::optional<double> read_attr_number(hid_t obj, const std::string& name, const std::string& what);
std::optional<std::vector<std::string>> read_attr_strings(hid_t obj, const std::string& name,
                                                          const std::string& what);
void write_attr_int(hid_t obj, const std::string& name, long long value, const std::string& what);
void write_attr_float(hid_t obj, const std::string& name, float value, const std::string& what);
void write_attr_strings(hid_t obj, const std::string& name, const std::vector<std::string>& values,
                        const std::string& what);

std::vector<hsize_t> dims_of(hid_t dataset);

}  // namespace ringtrain::h5
