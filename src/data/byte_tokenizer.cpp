// The byte tokenizer: token i is byte i, so every file round-trips exactly,
// whatever its encoding.
#include <fstream>
#include <sstream>

#include "core/hdf5.h"
#include "ringtrain/core/check.h"
#include "ringtrain/data/token_data.h"
#include "ringtrain/data/tokenizer.h"

namespace ringtrain {

namespace {
class ByteTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "bytes"; }
  std::size_t vocab_size() const override { return 256; }
  std::vector<std::int32_t> encode(std::string_view text) const override {
    std::vector<std::int32_t> ids(text.size());
    for (std::size_t i = 0; i < text.size(); ++i)
      ids[i] = static_cast<std::int32_t>(static_cast<unsigned char>(text[i]));
    return ids;
  }
  std::string decode(const std::vector<std::int32_t>& ids) const override {
    std::string s(ids.size(), '\0');
    for (std::size_t i = 0; i < ids.size(); ++i) {
      RT_CHECK(ids[i] >= 0 && ids[i] < 256, "byte tokenizer: token {} is not a byte", ids[i]);
      s[i] = static_cast<char>(static_cast<unsigned char>(ids[i]));
    }
    return s;
  }
  std::string model_bytes() const override { return {}; }
};
}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::bytes() {
  return std::make_unique<ByteTokenizer>();
}

std::unique_ptr<Tokenizer> Tokenizer::of_dataset(const std::string& path) {
  std::string name;
  {
    std::lock_guard lock(h5::library_mutex());
    h5::quiet_errors();
    RT_CHECK(H5Fis_hdf5(path.c_str()) > 0, "{} is not an HDF5 file", path);
    h5::File file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    RT_CHECK(file.valid(), "{} cannot be opened: {}", path, detail::hdf5_error_string());
    const auto t = h5::read_attr_strings(file.get(), "tokenizer", path + ":/");
    RT_CHECK(t && t->size() == 1,
             "{}: no tokenizer attribute (is it a token dataset from 'ringtrain convert text'?)",
             path);
    name = (*t)[0];
  }
  if (name == "bytes") return bytes();
  RT_CHECK(name == "sentencepiece", "{}: unknown tokenizer '{}' (expected bytes or sentencepiece)",
           path, name);
  const std::string model = read_tokenizer_model(path);
  RT_CHECK(!model.empty(), "{}: tokenizer sentencepiece but no /tokenizer_model stored", path);
  return sentencepiece(model, path + ":/tokenizer_model");
}

}  // namespace ringtrain
