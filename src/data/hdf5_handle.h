// A thin RAII layer over the HDF5 C API for the data layer: one owning handle
// type per kind of hid_t, attribute helpers, and the lock that serialises HDF5
// calls (Debian's serial HDF5 is built without thread safety, and the
// prefetcher reads on its own thread). Internal: public headers never see hdf5.h.
#pragma once

#include <hdf5.h>

#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ringtrain::h5 {

// Held around every HDF5 call sequence in the data layer.
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
