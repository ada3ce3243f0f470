// Tokenizers for `ringtrain convert text` and `ringtrain generate`: text to
// token ids and back.
//   bytes           each byte is a token (vocabulary 256): any file, UTF-8 or
//                   not, round-trips exactly
//   sentencepiece   a SentencePiece model (BPE or unigram) through Debian's
//                   libsentencepiece: an existing .model file, or one trained
//                   on the corpus; the model's bytes are stored with the
//                   dataset, so generation decodes with the same model
// sentencepiece_available() says whether this build has the library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ringtrain {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::string name() const = 0;  // "bytes", "sentencepiece"
  virtual std::size_t vocab_size() const = 0;
  virtual std::vector<std::int32_t> encode(std::string_view text) const = 0;
  virtual std::string decode(const std::vector<std::int32_t>& ids) const = 0;
  // What the dataset stores to rebuild it (empty for bytes).
  virtual std::string model_bytes() const = 0;

  static std::unique_ptr<Tokenizer> bytes();
  // Error naming `what` (the file or dataset) when the bytes are not a model.
  static std::unique_ptr<Tokenizer> sentencepiece(const std::string& model_bytes,
                                                  const std::string& what);
  // Trains a SentencePiece model on these files' text (one sentence a line).
  // `kind`: bpe or unigram.
  static std::unique_ptr<Tokenizer> train_sentencepiece(const std::vector<std::string>& files,
                                                        std::size_t vocab_size,
                                                        const std::string& kind);
  // A token dataset's tokenizer: its `tokenizer` attribute and stored model.
  static std::unique_ptr<Tokenizer> of_dataset(const std::string& path);
};

bool sentencepiece_available();

}  // namespace ringtrain
