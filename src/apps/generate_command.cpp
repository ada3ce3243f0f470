// `ringtrain generate`: text from a language-model checkpoint; the forward runs
// on --device (cpu, cuda or auto), the sampling on the host. The prompt is encoded with the
// tokenizer of the dataset the run trained on (stored in it by `convert text`), then each next
// token is sampled from the last position's logits: temperature, then the top-k most likely, then a
// draw from (--seed); temperature 0 takes the most likely token. A sequence longer than the context
// keeps its last `context` tokens.
//
// The sampler sees only the last position's logits, copied to the host, and
// draws from its own generator (std::mt19937_64 of --seed), so the same seed
// and the same logits give the same tokens on any device. Logits from a GPU
// agree with the CPU's to float rounding, not bit for bit: greedy decoding
// (--temperature 0 or --top-k 1) gives the same tokens unless two candidates
// tie within that rounding; a random draw can also differ where it falls
// within that rounding of a boundary between two tokens.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "apps/command.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/token_data.h"
#include "ringtrain/data/tokenizer.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/presets.h"
#include "ringtrain/tensor/tensor.h"
#include "ringtrain/train/checkpoint.h"

namespace ringtrain::apps {
namespace {

struct GenerateFlags {
  std::string ckpt, data, prompt;
  std::size_t tokens = 100;
  double temperature = 1.0;
  std::size_t top_k = 0;  // 0: every token
  std::uint64_t seed = 0;
};

std::int32_t sample_token(const float* logits, std::size_t vocab, const GenerateFlags& f,
                          std::mt19937_64& rng) {
  if (f.temperature == 0.0)
    return static_cast<std::int32_t>(std::max_element(logits, logits + vocab) - logits);
  std::vector<std::pair<double, std::int32_t>> ranked(vocab);
  for (std::size_t v = 0; v < vocab; ++v)
    ranked[v] = {static_cast<double>(logits[v]) / f.temperature, static_cast<std::int32_t>(v)};
  const std::size_t k = f.top_k > 0 ? std::min(f.top_k, vocab) : vocab;
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(k), ranked.end(),
                    [](const auto& a, const auto& b) { return a.first > b.first; });
  const double top = ranked[0].first;
  std::vector<double> weights(k);
  for (std::size_t i = 0; i < k; ++i) weights[i] = std::exp(ranked[i].first - top);
  std::discrete_distribution<std::size_t> pick(weights.begin(), weights.end());
  return ranked[pick(rng)].second;
}

int run_generate(const GenerateFlags& f, const Topology& topo) {
  RT_CHECK(topo.world_size() == 1, "generate runs on one rank, not {}", topo.world_size());
  std::string path = f.ckpt;
  if (std::filesystem::is_directory(path)) path = newest_intact_checkpoint_path(path, "--ckpt");
  const LoadedCheckpoint ck = read_checkpoint(path);
  const ModelSpec spec = ModelSpec::parse(ck.meta.model_spec);
  const auto lm = language_model_shape(spec.preset);
  const std::size_t context = lm                             ? lm->context
                              : spec.input_shape.size() == 1 ? spec.input_shape[0]
                                                             : 0;
  RT_CHECK(context > 0, "--ckpt {}: model '{}' is not a language model (no context)", path,
           ck.meta.model_spec);
  // The tokenizer: the training run's dataset unless --data names another.
  std::string data = f.data;
  if (data.empty()) {
    const auto cfg = nlohmann::json::parse(ck.meta.config_json, nullptr, false);
    if (!cfg.is_discarded() && cfg.contains("data") && cfg["data"].is_string())
      data = cfg["data"].get<std::string>();
    RT_CHECK(!data.empty(), "--ckpt {} does not name its dataset: give --data", path);
  }
  RT_CHECK(std::filesystem::exists(data),
           "dataset {} (the tokenizer of --ckpt {}) does not exist: give --data", data, path);
  const std::unique_ptr<Tokenizer> tok = Tokenizer::of_dataset(data);
  const std::size_t vocab = lm && lm->vocab > 0 ? lm->vocab : tok->vocab_size();

  const Device device = topo.device();
  ModelOptions options;
  options.device = device;
  options.max_batch = 1;
  const auto model = Model::build(spec, {context}, static_cast<int>(vocab), options);
  RT_CHECK(ck.params.size() == model->param_info().size(),
           "--ckpt {}: {} parameter tensors, the model has {}", path, ck.params.size(),
           model->param_info().size());
  std::vector<float> params(model->params().count);
  for (std::size_t i = 0; i < ck.params.size(); ++i) {
    const ParamInfo& p = model->param_info()[i];
    RT_CHECK(ck.params[i].first == p.name && ck.params[i].second.size() == p.count,
             "--ckpt {}: tensor {} is '{}' of {} values, the model's is '{}' of {}", path, i,
             ck.params[i].first, ck.params[i].second.size(), p.name, p.count);
    std::copy(ck.params[i].second.begin(), ck.params[i].second.end(), params.begin() + p.offset);
  }
  copy_view(model->params(), view_of(params.data(), params.size()));

  // No prompt: start from a newline, as nanoGPT's sample.py does, and leave
  // it out of the text printed (the text is all the model's).
  const bool unprompted = f.prompt.empty();
  std::vector<std::int32_t> seq = tok->encode(unprompted ? std::string("\n") : f.prompt);
  RT_CHECK(!seq.empty(), "--prompt '{}' encodes to no tokens", unprompted ? "\\n" : f.prompt);
  const std::size_t start_tokens = unprompted ? seq.size() : 0;
  if (unprompted) std::fprintf(stderr, "generate: no --prompt: starting from a newline\n");
  // The model sees its last `context` tokens at each step (the loop below
  // slides the window): a longer prompt is cut to its end, and said so.
  if (seq.size() > context)
    std::fprintf(stderr,
                 "generate: --prompt is %zu tokens, longer than the model's context of %zu: the "
                 "model sees only its last %zu (the whole prompt is printed)\n",
                 seq.size(), context, context);
  const std::size_t prompt_len = unprompted ? 0 : seq.size();
  std::mt19937_64 rng(f.seed);
  std::vector<float> x(context), last(vocab);
  const std::vector<std::int32_t> no_labels(context, kIgnoreLabel);
  // The window and its (ignored) labels where the model reads them.
  Tensor x_dev = Tensor::zeros({context}, DType::f32, device);
  Tensor labels_dev = Tensor::zeros({context}, DType::i32, device);
  copy_view(view_of(labels_dev.data_as<std::int32_t>(), context, device),
            view_of(no_labels.data(), context));
  for (std::size_t n = 0; n < f.tokens; ++n) {
    const std::size_t len = std::min(seq.size(), context);
    const std::size_t from = seq.size() - len;
    for (std::size_t j = 0; j < context; ++j)
      x[j] = j < len ? static_cast<float>(seq[from + j]) : 0.0f;  // causal: padding is unseen
    copy_view(view_of(x_dev.data_as<float>(), context, device), view_of(x.data(), context));
    model->forward(x_dev.data_as<float>(), labels_dev.data_as<std::int32_t>(), 1, false);
    model->synchronize();  // the logits are written on the model's stream
    model->copy_logits((len - 1) * vocab, last.data(), vocab);
    seq.push_back(sample_token(last.data(), vocab, f, rng));
  }
  const std::string text = tok->decode(std::vector<std::int32_t>(
      seq.begin() + static_cast<std::ptrdiff_t>(start_tokens), seq.end()));
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  // The figures on stderr: stdout is the text alone.
  std::fprintf(stderr, "generate: %zu prompt token(s) + %zu sampled from %s (step %llu) on %s\n",
               prompt_len, f.tokens, path.c_str(), static_cast<unsigned long long>(ck.meta.step),
               device.is_cuda() ? "cuda" : "cpu");
  return 0;
}

CLI::App* add_generate_command(CLI::App& app, CommandContext& ctx) {
  auto f = std::make_shared<GenerateFlags>();
  CLI::App* sub = app.add_subcommand(
      "generate", "Continue a text prompt with a language-model checkpoint (forward on --device)");
  sub->add_option("--ckpt", f->ckpt, "Checkpoint file, or a directory (its newest checkpoint)")
      ->required();
  sub->add_option("--prompt", f->prompt,
                  "Text to continue (none: start from a newline; longer than the model's "
                  "context: it sees the prompt's end)");
  sub->add_option("--tokens", f->tokens, "Tokens to sample")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  sub->add_option("--temperature", f->temperature,
                  "Divides the logits before sampling; 0 takes the most likely token")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  sub->add_option("--top-k", f->top_k, "Sample among the k most likely tokens (0: all)")
      ->capture_default_str();
  sub->add_option("--seed", f->seed, "Seed of the sampling: the same seed gives the same text")
      ->capture_default_str();
  sub->add_option("--data", f->data,
                  "Token dataset whose tokenizer to use (default: the checkpoint's training data)");
  add_device_options(sub, ctx, "cpu");
  sub->parse_complete_callback(
      [f, &ctx] { ctx.action = [f](const Topology& topo) { return run_generate(*f, topo); }; });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "generate", 35, ringtrain::apps::add_generate_command)
