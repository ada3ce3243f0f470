#include "data/token_split.h"

#include <algorithm>

#include "ringtrain/core/check.h"
#include "ringtrain/data/token_data.h"

namespace ringtrain {

std::size_t token_windows(std::uint64_t tokens, std::size_t context, bool keep_partial) {
  if (tokens < 2 || context == 0) return 0;
  const std::uint64_t targets = tokens - 1;
  return static_cast<std::size_t>(keep_partial ? (targets + context - 1) / context
                                               : targets / context);
}

TokenSplit::TokenSplit(hid_t file, hid_t group, std::string where) : where_(std::move(where)) {
  tokens_ = h5::DataSet(H5Dopen2(group, "tokens", H5P_DEFAULT));
  RT_CHECK(tokens_.valid(), "{}/tokens: cannot open dataset: {} (corrupt file?)", where_,
           detail::hdf5_error_string());
  {
    h5::Type t(H5Dget_type(tokens_.get()));
    const H5T_class_t cls = H5Tget_class(t.get());
    const std::size_t size = H5Tget_size(t.get());
    const bool u16 = cls == H5T_INTEGER && size == 2 && H5Tget_sign(t.get()) == H5T_SGN_NONE;
    const bool i32 = cls == H5T_INTEGER && size == 4 && H5Tget_sign(t.get()) == H5T_SGN_2;
    RT_CHECK(u16 || i32, "{}/tokens: unsupported dtype (tokens must be uint16 or int32)", where_);
    wide_ = i32;
  }
  const std::vector<hsize_t> dims = h5::dims_of(tokens_.get());
  RT_CHECK(dims.size() == 1, "{}/tokens: must be a flat array of token ids, it has rank {}", where_,
           dims.size());
  n_tokens_ = dims[0];
  auto number = [&](const char* name) {
    auto v = h5::read_attr_number(group, name, where_);
    return v ? v : h5::read_attr_number(file, name, where_ + " (file root)");
  };
  const auto vocab = number("vocab_size");
  RT_CHECK(vocab.has_value(),
           "{}: token data needs the attribute vocab_size (on the split or root)", where_);
  RT_CHECK(*vocab >= 2 && *vocab <= kMaxTokenVocab &&
               *vocab == static_cast<double>(static_cast<long long>(*vocab)),
           "{}: attribute vocab_size = {} must be an integer in [2, {}]", where_, *vocab,
           kMaxTokenVocab);
  vocab_ = static_cast<std::size_t>(*vocab);
  RT_CHECK(wide_ || vocab_ <= 65536, "{}/tokens: uint16 tokens cannot hold a vocabulary of {}",
           where_, vocab_);
  auto name = h5::read_attr_strings(group, "tokenizer", where_);
  if (!name) name = h5::read_attr_strings(file, "tokenizer", where_ + " (file root)");
  tokenizer_ = name && name->size() == 1 ? (*name)[0] : std::string();
}

void TokenSplit::set_context(std::size_t context, bool keep_partial) {
  RT_CHECK(context >= 1, "{}: the context must be at least 1 token", where_);
  ctx_ = context;
  windows_ = token_windows(n_tokens_, context, keep_partial);
}

std::vector<std::int32_t> TokenSplit::read_tokens(std::uint64_t begin, std::uint64_t end) {
  RT_CHECK(begin <= end && end <= n_tokens_, "{}/tokens: range [{}, {}) out of range ({} tokens)",
           where_, begin, end, n_tokens_);
  std::vector<std::int32_t> out(end - begin);
  if (begin == end) return out;
  std::lock_guard lock(h5::library_mutex());
  h5::Space fspace(H5Dget_space(tokens_.get()));
  const hsize_t start = begin, count = end - begin;
  RT_H5_CHECK(H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, &start, nullptr, &count, nullptr),
              where_ + "/tokens");
  h5::Space mspace(H5Screate_simple(1, &count, nullptr));
  // HDF5 widens uint16 to int32 on the way.
  RT_CHECK(H5Dread(tokens_.get(), H5T_NATIVE_INT32, mspace.get(), fspace.get(), H5P_DEFAULT,
                   out.data()) >= 0,
           "{}/tokens: reading tokens {}..{} failed: {} (truncated or corrupt file?)", where_,
           begin, end, detail::hdf5_error_string());
  for (std::size_t i = 0; i < out.size(); ++i)
    RT_CHECK(out[i] >= 0 && static_cast<std::size_t>(out[i]) < vocab_,
             "{}/tokens: token {} at position {} is outside [0, {}) (vocab_size = {})", where_,
             out[i], begin + i, vocab_, vocab_);
  return out;
}

void TokenSplit::read(std::span<const std::uint64_t> indices, float* x, std::int32_t* y) {
  RT_CHECK(ctx_ > 0, "{}: token data read before its context was set", where_);
  for (std::size_t i = 0; i < indices.size(); ++i) {
    RT_CHECK(indices[i] < windows_, "{}: window {} out of range ({} windows of {} tokens)", where_,
             indices[i], windows_, ctx_);
    const std::uint64_t begin = indices[i] * ctx_;
    const std::uint64_t end = std::min<std::uint64_t>(begin + ctx_ + 1, n_tokens_);
    const std::vector<std::int32_t> t = read_tokens(begin, end);
    const std::size_t have = t.size() - 1;  // targets in this window
    float* xi = x + i * ctx_;
    for (std::size_t j = 0; j < ctx_; ++j) xi[j] = j < have ? static_cast<float>(t[j]) : 0.0f;
    if (y == nullptr) continue;
    std::int32_t* yi = y + i * ctx_;
    for (std::size_t j = 0; j < ctx_; ++j) yi[j] = j < have ? t[j + 1] : kIgnoreLabel;
  }
}

}  // namespace ringtrain
