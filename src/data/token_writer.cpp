// Writing a token dataset (ringtrain/data/token_data.h).
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/hdf5.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/temp_file_guard.h"
#include "ringtrain/data/token_data.h"

namespace ringtrain {

void write_token_file(const std::string& path, const std::vector<TokenSplitData>& splits,
                      std::size_t vocab_size, const std::string& tokenizer,
                      const std::string& tokenizer_model) {
  std::lock_guard lock(h5::library_mutex());
  h5::quiet_errors();
  RT_CHECK(vocab_size >= 2 && static_cast<double>(vocab_size) <= kMaxTokenVocab,
           "{}: vocabulary of {} tokens (must be in [2, 2^24])", path, vocab_size);
  const std::string tmp = fmt::format("{}.tmp-{}", path, static_cast<long>(::getpid()));
  std::optional<TempFileGuard> interrupted(std::in_place, tmp);
  const auto parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  RT_CHECK(parent.empty() || std::filesystem::is_directory(parent, ec),
           "output {}: directory {} does not exist", path, parent.string());
  bool committed = false;
  struct RemoveUnlessCommitted {
    const std::string& tmp;
    const bool& committed;
    ~RemoveUnlessCommitted() {
      if (!committed) std::remove(tmp.c_str());
    }
  } cleanup{tmp, committed};
  {
    h5::File file(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    RT_CHECK(file.valid(), "cannot create {}: {}", tmp, detail::hdf5_error_string());
    h5::write_attr_int(file.get(), "vocab_size", static_cast<long long>(vocab_size), path);
    h5::write_attr_strings(file.get(), "tokenizer", {tokenizer}, path);
    const bool narrow = vocab_size <= 65536;
    for (const TokenSplitData& s : splits) {
      const std::string where = fmt::format("{}:/{}", path, s.name);
      h5::Group group(
          H5Gcreate2(file.get(), s.name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      RT_CHECK(group.valid(), "{}: cannot create the split: {}", where,
               detail::hdf5_error_string());
      const hsize_t n = s.tokens.size();
      h5::Space space(H5Screate_simple(1, &n, nullptr));
      h5::DataSet ds(H5Dcreate2(group.get(), "tokens", narrow ? H5T_STD_U16LE : H5T_STD_I32LE,
                                space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      RT_CHECK(ds.valid(), "{}/tokens: cannot create: {}", where, detail::hdf5_error_string());
      if (n > 0)
        RT_H5_CHECK(
            H5Dwrite(ds.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, s.tokens.data()),
            where + "/tokens");
    }
    if (!tokenizer_model.empty()) {
      const hsize_t n = tokenizer_model.size();
      h5::Space space(H5Screate_simple(1, &n, nullptr));
      h5::DataSet ds(H5Dcreate2(file.get(), "tokenizer_model", H5T_STD_U8LE, space.get(),
                                H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
      RT_CHECK(ds.valid(), "{}:/tokenizer_model: cannot create: {}", path,
               detail::hdf5_error_string());
      RT_H5_CHECK(H5Dwrite(ds.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                           tokenizer_model.data()),
                  path + ":/tokenizer_model");
    }
    RT_H5_CHECK(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), tmp);
    RT_H5_CHECK(file.close(), tmp);
  }
  std::filesystem::rename(tmp, path, ec);
  RT_CHECK(!ec, "cannot rename {} to {}: {}", tmp, path, ec.message());
  committed = true;
}

std::string read_tokenizer_model(const std::string& path) {
  std::lock_guard lock(h5::library_mutex());
  h5::quiet_errors();
  RT_CHECK(H5Fis_hdf5(path.c_str()) > 0, "{} is not an HDF5 file", path);
  h5::File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  RT_CHECK(file.valid(), "{} cannot be opened: {}", path, detail::hdf5_error_string());
  if (!h5::link_exists(file.get(), "tokenizer_model")) return {};
  h5::DataSet ds(H5Dopen2(file.get(), "tokenizer_model", H5P_DEFAULT));
  RT_CHECK(ds.valid(), "{}:/tokenizer_model: {}", path, detail::hdf5_error_string());
  const std::vector<hsize_t> dims = h5::dims_of(ds.get());
  RT_CHECK(dims.size() == 1, "{}:/tokenizer_model must be a flat byte array", path);
  std::string bytes(dims[0], '\0');
  if (!bytes.empty())
    RT_H5_CHECK(H5Dread(ds.get(), H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()),
                path + ":/tokenizer_model");
  return bytes;
}

}  // namespace ringtrain
