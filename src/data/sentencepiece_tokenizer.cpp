// SentencePiece through Debian's libsentencepiece, when the build found it
// (RINGTRAIN_SENTENCEPIECE); otherwise every entry point says the build has
// no sentencepiece, and the byte tokenizer still works.
#include "ringtrain/config.h"
#include "ringtrain/core/check.h"
#include "ringtrain/data/tokenizer.h"

#if RINGTRAIN_SENTENCEPIECE
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <fstream>
#include <mutex>
#include <unordered_map>
#endif

namespace ringtrain {

bool sentencepiece_available() {
  return RINGTRAIN_SENTENCEPIECE != 0;
}

#if RINGTRAIN_SENTENCEPIECE

namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(std::string model, const std::string& what) : model_(std::move(model)) {
    const auto status = sp_.LoadFromSerializedProto(model_);
    RT_CHECK(status.ok(), "{}: not a sentencepiece model: {}", what, status.ToString());
  }
  std::string name() const override { return "sentencepiece"; }
  std::size_t vocab_size() const override { return static_cast<std::size_t>(sp_.GetPieceSize()); }
  std::vector<std::int32_t> encode(std::string_view text) const override {
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    RT_CHECK(status.ok(), "sentencepiece: cannot encode: {}", status.ToString());
    return {ids.begin(), ids.end()};
  }
  std::string decode(const std::vector<std::int32_t>& ids) const override {
    std::string text;
    const auto status = sp_.Decode(std::vector<int>(ids.begin(), ids.end()), &text);
    RT_CHECK(status.ok(), "sentencepiece: cannot decode: {}", status.ToString());
    return text;
  }
  std::string model_bytes() const override { return model_; }

 private:
  std::string model_;
  sentencepiece::SentencePieceProcessor sp_;
};

// The corpus one line at a time, so training never holds the files twice.
class FileLines final : public sentencepiece::SentenceIterator {
 public:
  explicit FileLines(const std::vector<std::string>& files) : files_(files) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    while (true) {
      if (in_.is_open() && std::getline(in_, line_)) return;
      if (next_ == files_.size()) {
        done_ = true;
        return;
      }
      in_ = std::ifstream(files_[next_++], std::ios::binary);
    }
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& files_;
  std::size_t next_ = 0;
  std::ifstream in_;
  std::string line_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::sentencepiece(const std::string& model_bytes,
                                                    const std::string& what) {
  return std::make_unique<SentencePieceTokenizer>(model_bytes, what);
}

std::unique_ptr<Tokenizer> Tokenizer::train_sentencepiece(const std::vector<std::string>& files,
                                                          std::size_t vocab_size,
                                                          const std::string& kind) {
  RT_CHECK(kind == "bpe" || kind == "unigram",
           "--train-tokenizer: model type '{}' (expected bpe or unigram)", kind);
  RT_CHECK(vocab_size >= 8, "--train-tokenizer: a vocabulary of {} is too small", vocab_size);
  // The trainer logs to stderr at length; minloglevel keeps its errors only.
  const std::unordered_map<std::string, std::string> args = {
      {"vocab_size", std::to_string(vocab_size)},
      {"model_type", kind},
      {"character_coverage", "1.0"},
      {"byte_fallback", "true"},  // any byte encodes, so nothing becomes <unk>
      // Text as it is (newlines, tabs, runs of spaces): decoding gives it back.
      {"normalization_rule_name", "identity"},
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},
      {"minloglevel", "2"},
      {"num_threads", "1"},
      {"model_prefix", ""}};
  FileLines lines(files);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model);
  RT_CHECK(status.ok(),
           "--train-tokenizer {}: sentencepiece training failed: {} (the vocabulary holds 256 "
           "byte pieces, so that any text encodes, besides the corpus's characters and merges)",
           vocab_size, status.ToString());
  return sentencepiece(model, "the trained sentencepiece model");
}

#else

std::unique_ptr<Tokenizer> Tokenizer::sentencepiece(const std::string&, const std::string& what) {
  RT_CHECK(false,
           "{}: this ringtrain was built without sentencepiece (install libsentencepiece-dev "
           "and rebuild); the bytes tokenizer works without it",
           what);
  return nullptr;
}

std::unique_ptr<Tokenizer> Tokenizer::train_sentencepiece(const std::vector<std::string>&,
                                                          std::size_t, const std::string&) {
  return sentencepiece({}, "--train-tokenizer");
}

#endif

}  // namespace ringtrain
