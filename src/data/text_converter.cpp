// `ringtrain convert text`: text files to a token dataset. The files are one
// stream in the order given; the test split is the tail of each file, so every
// file is in both splits and no test window overlaps training text.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ringtrain/core/check.h"
#include "ringtrain/data/converters.h"
#include "ringtrain/data/output_guard.h"
#include "ringtrain/data/token_data.h"
#include "ringtrain/data/tokenizer.h"

namespace ringtrain {

namespace {
std::string read_file(const std::string& path, const char* what) {
  std::error_code ec;
  RT_CHECK(std::filesystem::exists(path, ec), "{} {} does not exist", what, path);
  RT_CHECK(!std::filesystem::is_directory(path, ec), "{} {} is a directory", what, path);
  std::ifstream in(path, std::ios::binary);
  RT_CHECK(in.good(), "{} {} cannot be read", what, path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

ConvertSummary convert_text(const TextConvertOptions& o) {
  RT_CHECK(!o.files.empty(), "convert text: no input files given");
  RT_CHECK(o.test_fraction >= 0.0 && o.test_fraction < 1.0, "--test-fraction {} must be in [0, 1)",
           o.test_fraction);
  std::vector<GuardedInput> inputs;
  for (const std::string& f : o.files) inputs.push_back({"text file", f});
  const std::string sp_prefix = "sentencepiece:";
  std::string model_path;
  if (o.tokenizer.rfind(sp_prefix, 0) == 0) {
    model_path = o.tokenizer.substr(sp_prefix.size());
    RT_CHECK(!model_path.empty(), "--tokenizer sentencepiece:MODEL needs the model's path");
    RT_CHECK(o.train_vocab == 0,
             "--train-tokenizer trains a new model: give --tokenizer sentencepiece, not {}",
             o.tokenizer);
    inputs.push_back({"--tokenizer", model_path});
  } else if (o.tokenizer == "sentencepiece") {
    RT_CHECK(o.train_vocab > 0,
             "--tokenizer sentencepiece needs a model: sentencepiece:MODEL, or "
             "--train-tokenizer VOCAB to train one on the files");
  } else {
    RT_CHECK(o.tokenizer == "bytes",
             "--tokenizer {}: expected bytes, sentencepiece:MODEL or sentencepiece (with "
             "--train-tokenizer VOCAB)",
             o.tokenizer);
    RT_CHECK(o.train_vocab == 0,
             "--train-tokenizer trains a sentencepiece model: add --tokenizer sentencepiece");
  }
  guard_output(o.output, inputs, o.force, "-o");
  for (const std::string& f : o.files) {
    std::error_code ec;
    RT_CHECK(std::filesystem::is_regular_file(f, ec), "text file {} does not exist", f);
  }

  std::unique_ptr<Tokenizer> tok;
  if (!model_path.empty())
    tok = Tokenizer::sentencepiece(read_file(model_path, "tokenizer model"), model_path);
  else if (o.train_vocab > 0)
    tok = Tokenizer::train_sentencepiece(o.files, o.train_vocab, o.tokenizer_type);
  else
    tok = Tokenizer::bytes();

  // Each file's last test_fraction of tokens goes to /test: every file (a
  // corpus of many kinds of text) is represented in both splits, and no test
  // window overlaps training text of its file.
  std::vector<TokenSplitData> splits(2);
  splits[0].name = "train";
  splits[1].name = "test";
  std::size_t bytes = 0, total = 0;
  for (const std::string& f : o.files) {
    const std::string text = read_file(f, "text file");
    bytes += text.size();
    const std::vector<std::int32_t> ids = tok->encode(text);
    total += ids.size();
    const auto test_n =
        static_cast<std::size_t>(std::floor(static_cast<double>(ids.size()) * o.test_fraction));
    const auto cut = ids.end() - static_cast<std::ptrdiff_t>(test_n);
    splits[0].tokens.insert(splits[0].tokens.end(), ids.begin(), cut);
    splits[1].tokens.insert(splits[1].tokens.end(), cut, ids.end());
  }
  RT_CHECK(total >= 2, "convert text: the input ({}) holds {} token(s): nothing to learn",
           o.files.size() == 1 ? o.files[0] : fmt::format("{} files", o.files.size()), total);
  RT_CHECK(splits[0].tokens.size() >= 2, "convert text: --test-fraction {} leaves no training text",
           o.test_fraction);
  write_token_file(o.output, splits, tok->vocab_size(), tok->name(), tok->model_bytes());
  ConvertSummary s;
  s.text = fmt::format(
      "  tokenizer {} (vocabulary {}): {} bytes of text from {} file(s) -> {} tokens ({:.2f} "
      "bytes per token)\n  /train {} tokens\n  /test {} tokens\n",
      tok->name(), tok->vocab_size(), bytes, o.files.size(), total,
      static_cast<double>(bytes) / static_cast<double>(total), splits[0].tokens.size(),
      splits[1].tokens.size());
  return s;
}

}  // namespace ringtrain
