// Every TrainConfig flag is either compared at start-up or listed, with a
// reason, as not compared: a new flag that joins neither list fails here.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "ringtrain/train/config_agreement.h"

using namespace ringtrain;

TEST_CASE("every config key is compared or listed as not compared, never both") {
  const TrainConfig cfg;
  std::set<std::string> compared, not_compared;
  for (const SignatureField& f : config_agreement_fields(cfg)) {
    INFO(f.name);
    CHECK(compared.insert(f.name).second);
  }
  for (const auto& [flag, reason] : config_flags_not_compared()) {
    INFO(flag);
    CHECK(!reason.empty());
    CHECK(not_compared.insert(flag).second);
    CHECK(compared.count(flag) == 0);
  }
  std::set<std::string> config_flags;
  const nlohmann::json keys = nlohmann::json::parse(cfg.to_json());
  for (const auto& [key, value] : keys.items()) {
    const std::string flag = config_key_flag(key);
    INFO("TrainConfig key '" << key << "' (" << flag
                             << ") must join config_agreement_fields or config_flags_not_compared");
    CHECK((compared.count(flag) + not_compared.count(flag)) == 1);
    config_flags.insert(flag);
  }
  // No stale entries: each listed flag is a key of the config.
  for (const std::string& flag : compared) {
    INFO(flag);
    CHECK(config_flags.count(flag) == 1);
  }
  for (const std::string& flag : not_compared) {
    INFO(flag);
    CHECK(config_flags.count(flag) == 1);
  }
}

TEST_CASE("the collective cadence flags are compared") {
  const TrainConfig cfg;
  std::set<std::string> compared;
  for (const SignatureField& f : config_agreement_fields(cfg)) compared.insert(f.name);
  for (const char* flag :
       {"--max-steps", "--epochs", "--eval-every", "--check-every", "--straggler-every",
        "--log-every", "--ckpt-every", "--ckpt-dir", "--trace", "--resume", "--accum", "--batch",
        "--global-batch", "--bucket-mb", "--no-overlap", "--backend", "--nonfinite"}) {
    INFO(flag);
    CHECK(compared.count(flag) == 1);
  }
}

TEST_CASE("a changed flag changes its field; values print in their own form") {
  TrainConfig a, b;
  b.lr = 0.1f;
  b.max_steps = 7;
  b.ckpt_dir = "ckpt";
  const auto fa = config_agreement_fields(a), fb = config_agreement_fields(b);
  REQUIRE(fa.size() == fb.size());
  std::set<std::string> differ;
  for (std::size_t i = 0; i < fa.size(); ++i)
    if (fa[i].value != fb[i].value) differ.insert(fa[i].name);
  CHECK(differ == std::set<std::string>{"--lr", "--max-steps", "--ckpt-dir"});
  for (const SignatureField& f : fa) {
    if (f.name == "--lr") CHECK(f.text == "0.05");
    if (f.name == "--max-steps") CHECK(f.text == "0");
    if (f.name == "--ckpt-dir") CHECK(f.text == "not given");
  }
  CHECK(signature_real("x", 0.05f).text == "0.05");
  CHECK(signature_text("x", "cosine").text == "cosine");
  CHECK(signature_bool("x", true).text == "on");
}
