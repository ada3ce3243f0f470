// A split of a token dataset (`ringtrain convert text`): one flat array of
// token ids, read as windows of ctx + 1 tokens. Window k starts at token k*ctx,
// so consecutive windows share one token and every token but the first is a
// target exactly once per pass:
//
//   tokens   t0 t1 t2 t3 t4 t5 t6 t7 t8 t9          (ctx = 4)
//   window 0 [t0 t1 t2 t3 t4]
//   window 1             [t4 t5 t6 t7 t8]
//   window 2                         [t8 t9 .. ..]  (partial: kept for evaluation only)
//
// A sample is the window's first ctx tokens as floats (ids below 2^24 are exact
// in float32, so the layer interface carries them unchanged) and its labels are
// the next ctx tokens, int32. A partial window pads its input with token 0 and
// its labels with kIgnoreLabel, which the loss skips. Internal to src/data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/hdf5.h"

namespace ringtrain {

class TokenSplit {
 public:
  // `group` is the split's group, which holds a dataset `tokens`. Error naming
  // the file and split for a bad dtype, rank or missing attribute.
  TokenSplit(hid_t file, hid_t group, std::string where);

  std::uint64_t token_count() const { return n_tokens_; }
  std::size_t vocab_size() const { return vocab_; }
  const std::string& tokenizer() const { return tokenizer_; }
  // Windows of `context` tokens; keep_partial: the last, shorter window too
  // (evaluation covers every token), else only full windows (training).
  void set_context(std::size_t context, bool keep_partial);
  std::size_t context() const { return ctx_; }
  std::size_t windows() const { return windows_; }
  // Windows `indices` into x (ctx floats each) and y (ctx labels each; may be null).
  void read(std::span<const std::uint64_t> indices, float* x, std::int32_t* y);
  // Tokens [begin, end) as stored, widened to int32 (tools, tests).
  std::vector<std::int32_t> read_tokens(std::uint64_t begin, std::uint64_t end);

 private:
  std::string where_;
  h5::DataSet tokens_;
  bool wide_ = false;  // int32 on file (else uint16)
  std::uint64_t n_tokens_ = 0;
  std::size_t vocab_ = 0, ctx_ = 0, windows_ = 0;
  std::string tokenizer_;
  std::vector<std::int32_t> scratch_;
};

// Windows of `context` over `tokens` ids: full ones only, or with the partial last.
std::size_t token_windows(std::uint64_t tokens, std::size_t context, bool keep_partial);

}  // namespace ringtrain
