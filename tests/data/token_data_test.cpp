// Token datasets: windows of a context over a flat token array, sharded by the
// sampler's rule. Training windows are disjoint in their targets within an
// epoch and every rank runs the same number of steps; evaluation at any world
// size predicts every token of the split but the first exactly once.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <set>

#include "ringtrain/core/error.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/sharded_sampler.h"
#include "ringtrain/data/token_data.h"
#include "ringtrain/data/tokenizer.h"

using namespace ringtrain;
using Catch::Contains;

namespace {
std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ringtrain-token-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}
// Token i is a function of i that no window boundary lines up with.
std::vector<std::int32_t> stream(std::size_t n, std::int32_t vocab) {
  std::vector<std::int32_t> t(n);
  for (std::size_t i = 0; i < n; ++i) t[i] = static_cast<std::int32_t>((i * 7919 + 13) % vocab);
  return t;
}
}  // namespace

TEST_CASE("token windows: inputs, labels and the padded last window") {
  const std::string path = temp_path("windows.h5");
  const auto train = stream(103, 300);  // 300 > 256: stored as uint16
  write_token_file(path, {{"train", train}, {"test", stream(10, 300)}}, 300, "bytes", "");
  Dataset d = Dataset::open(path, "train");
  REQUIRE(d.is_tokens());
  CHECK(d.num_classes() == 300);
  CHECK(d.tokenizer() == "bytes");
  CHECK(d.token_count() == 103);
  CHECK(d.size() == 0);
  d.set_token_context(8, /*keep_partial=*/false);
  CHECK(d.size() == 102 / 8);  // 12 full windows
  CHECK(d.sample_shape() == std::vector<std::size_t>{8});
  CHECK(d.labels_per_sample() == 8);
  std::vector<float> x(2 * 8);
  std::vector<std::int32_t> y(2 * 8);
  const std::vector<std::uint64_t> idx{5, 0};
  d.read(idx, x.data(), y.data());
  for (std::size_t j = 0; j < 8; ++j) {
    CHECK(x[j] == static_cast<float>(train[40 + j]));
    CHECK(y[j] == train[41 + j]);
    CHECK(x[8 + j] == static_cast<float>(train[j]));
    CHECK(y[8 + j] == train[j + 1]);
  }
  d.set_token_context(8, /*keep_partial=*/true);
  REQUIRE(d.size() == 13);  // 12 full + 6 targets in the last
  const std::vector<std::uint64_t> last{12};
  d.read(last, x.data(), y.data());
  for (std::size_t j = 0; j < 8; ++j) {
    if (j < 6) {
      CHECK(x[j] == static_cast<float>(train[96 + j]));
      CHECK(y[j] == train[97 + j]);
    } else {
      CHECK(x[j] == 0.0f);
      CHECK(y[j] == kIgnoreLabel);
    }
  }
  CHECK_THROWS_WITH(d.read(std::vector<std::uint64_t>{13}, x.data(), y.data()),
                    Contains("window 13 out of range"));
  CHECK_THROWS_WITH(d.labels(), Contains("a label per token"));
}

TEST_CASE("token windows shard disjointly with equal steps, and evaluate exactly") {
  const std::string path = temp_path("shard.h5");
  const std::size_t n_tokens = 1001, ctx = 7;
  write_token_file(path, {{"train", stream(n_tokens, 50)}}, 50, "bytes", "");
  for (int world : {1, 2, 3, 4}) {
    CAPTURE(world);
    Dataset d = Dataset::open(path, "train");
    d.set_token_context(ctx, false);
    const std::size_t batch = 3;
    std::set<std::uint64_t> targets;  // token positions predicted this epoch
    std::size_t steps = 0;
    for (int r = 0; r < world; ++r) {
      ShardedSampler s(d.size(), batch, r, world, 11);
      if (r == 0) steps = s.steps_per_epoch();
      CHECK(s.steps_per_epoch() == steps);
      for (std::size_t k = 0; k < s.steps_per_epoch(); ++k)
        for (std::uint64_t w : s.rank_indices({1, k}))
          for (std::size_t j = 1; j <= ctx; ++j) CHECK(targets.insert(w * ctx + j).second);
    }
    CHECK(steps == d.size() / (batch * static_cast<std::size_t>(world)));
  }
  // Evaluation: contiguous window ranges, the partial window kept: every
  // position 1..N-1 is a target once, at 1 and 3 ranks alike.
  for (int world : {1, 3}) {
    CAPTURE(world);
    Dataset d = Dataset::open(path, "train");
    d.set_token_context(ctx, true);
    std::vector<int> seen(n_tokens, 0);
    for (int r = 0; r < world; ++r) {
      const EvalShard shard = eval_shard(d.size(), r, world);
      std::vector<std::uint64_t> idx;
      for (std::uint64_t w = shard.begin; w < shard.end; ++w) idx.push_back(w);
      std::vector<float> x(idx.size() * ctx);
      std::vector<std::int32_t> y(idx.size() * ctx);
      d.read(idx, x.data(), y.data());
      for (std::size_t i = 0; i < idx.size(); ++i)
        for (std::size_t j = 0; j < ctx; ++j)
          if (y[i * ctx + j] != kIgnoreLabel) ++seen[idx[i] * ctx + j + 1];
    }
    CHECK(seen[0] == 0);
    for (std::size_t p = 1; p < n_tokens; ++p) CHECK(seen[p] == 1);
  }
}

TEST_CASE("token data: bad files name the problem") {
  const std::string path = temp_path("bad.h5");
  write_token_file(path, {{"train", {1, 2, 3}}}, 4, "bytes", "model-bytes");
  CHECK(read_tokenizer_model(path) == "model-bytes");
  Dataset d = Dataset::open(path, "train");
  d.set_token_context(1, false);
  CHECK(d.size() == 2);
  // A token outside the vocabulary is an error naming its position.
  write_token_file(path, {{"train", {1, 9, 3}}}, 4, "bytes", "");
  Dataset bad = Dataset::open(path, "train");
  bad.set_token_context(2, false);
  std::vector<float> x(2);
  std::vector<std::int32_t> y(2);
  CHECK_THROWS_WITH(bad.read(std::vector<std::uint64_t>{0}, x.data(), y.data()),
                    Contains("token 9 at position 1 is outside [0, 4)"));
  CHECK_THROWS_WITH(write_token_file(path, {{"train", {1}}}, 1, "bytes", ""),
                    Contains("vocabulary of 1 tokens"));
}

TEST_CASE("tokenizers round-trip text: bytes always, sentencepiece when built in") {
  const std::string text = "Caf\xc3\xa9 au lait\n\ttabs,  double  spaces\nand \xff\xfe raw bytes\n";
  const auto bytes = Tokenizer::bytes();
  CHECK(bytes->vocab_size() == 256);
  const auto ids = bytes->encode(text);
  CHECK(ids.size() == text.size());
  CHECK(bytes->decode(ids) == text);
  if (!sentencepiece_available()) {
    CHECK_THROWS_WITH(Tokenizer::sentencepiece("x", "m"), Contains("built without sentencepiece"));
    return;
  }
  // Byte fallback needs 256 byte pieces besides the corpus's characters: a
  // vocabulary of 400 on a text of some size (Debian's GPL-3).
  const std::string corpus = "/usr/share/common-licenses/GPL-3";
  REQUIRE(std::filesystem::exists(corpus));
  const auto sp = Tokenizer::train_sentencepiece({corpus}, 400, "bpe");
  CHECK(sp->name() == "sentencepiece");
  CHECK(sp->vocab_size() == 400);
  const std::string seen = "the GNU General Public License\nof the Program\n";
  const auto sp_ids = sp->encode(seen);
  CHECK(sp_ids.size() < seen.size());  // subwords, not bytes
  CHECK(sp->decode(sp_ids) == seen);
  // Byte fallback: UTF-8 text with characters the model never saw still
  // round-trips, tabs and runs of spaces included. (Bytes that are not UTF-8
  // come back as U+FFFD: such files want the bytes tokenizer.)
  const std::string unseen = "Caf\xc3\xa9 \xe2\x82\xac 5\n\ttabs,  double  spaces\n";
  CHECK(sp->decode(sp->encode(unseen)) == unseen);
  // The stored model rebuilds the same tokenizer.
  const auto again = Tokenizer::sentencepiece(sp->model_bytes(), "stored model");
  CHECK(again->encode(seen) == sp_ids);
  CHECK_THROWS_WITH(Tokenizer::sentencepiece("not a model", "x.model"),
                    Contains("x.model: not a sentencepiece model"));
}
