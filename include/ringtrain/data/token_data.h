// Token datasets: what `ringtrain convert text` writes and `train` reads as
// windows of a language model's context.
//
//   /<split>/tokens   flat uint16 (vocabularies up to 65536) or int32 token ids
//   attributes on the file root (or a split):
//     vocab_size (integer), tokenizer ("bytes" or "sentencepiece")
//   /tokenizer_model  uint8: the sentencepiece model's bytes (sentencepiece only),
//                     so that `generate` decodes with the tokenizer that encoded
//
// Dataset::open recognises a split with `tokens`; Dataset::set_token_context
// then makes its samples windows (src/data/token_split.h draws them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain {

// A label the loss skips (PyTorch's ignore_index default): the padding of a
// partial window.
inline constexpr std::int32_t kIgnoreLabel = -100;
// Token ids travel as float32 into the model; 2^24 is where float32 stops
// being exact for integers.
inline constexpr double kMaxTokenVocab = 16777216.0;

}  // namespace ringtrain

namespace ringtrain {

struct TokenSplitData {
  std::string name;  // "train", "test"
  std::vector<std::int32_t> tokens;
};

// Writes a token dataset: each split's tokens (uint16 when vocab_size <=
// 65536, else int32), vocab_size and tokenizer on the root, and the
// tokenizer's model bytes when not empty. Through a temporary name renamed
// into place, so an interrupted write leaves no file under `path`.
void write_token_file(const std::string& path, const std::vector<TokenSplitData>& splits,
                      std::size_t vocab_size, const std::string& tokenizer,
                      const std::string& tokenizer_model);
// The tokenizer model bytes stored in a token dataset; empty when it has none.
std::string read_tokenizer_model(const std::string& path);

}  // namespace ringtrain
