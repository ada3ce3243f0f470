// --no-decay's parameter groups: which tensors a mask exempts in a small
// BatchNorm network and in the resnet18 preset (BN weight and bias, every
// bias), and the flag's errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/model/parameter_groups.h"

using namespace ringtrain;
using Catch::Matchers::Contains;

namespace {

std::unique_ptr<Model> build(const std::string& spec, std::vector<std::size_t> input, int classes) {
  ModelOptions o;
  o.max_batch = 2;
  return Model::build(ModelSpec::parse(spec), input, classes, o);
}

}  // namespace

TEST_CASE("--no-decay parses a comma list and names a bad item", "[model][decay]") {
  CHECK_FALSE(parse_no_decay("").any());
  CHECK_FALSE(parse_no_decay("none").any());
  const NoDecay g = parse_no_decay("norm,bias");
  CHECK(g.norm);
  CHECK(g.bias);
  CHECK_FALSE(g.embedding);
  CHECK(g.to_string() == "norm,bias");
  CHECK(parse_no_decay("embedding").to_string() == "embedding");
  CHECK_THROWS_WITH(parse_no_decay("norm,biases"), Contains("--no-decay") && Contains("'biases'"));
}

TEST_CASE("the mask exempts norm parameters and biases, tensor by tensor", "[model][decay]") {
  const auto m = build(
      "conv2d(out=4, kernel=3, padding=1, bias=false); batch_norm; relu; flatten; linear(out=3)",
      {1, 4, 4}, 3);
  const std::vector<std::string> norm = exempt_tensors(*m, parse_no_decay("norm"));
  const std::vector<std::string> bias = exempt_tensors(*m, parse_no_decay("bias"));
  const std::vector<std::string> both = exempt_tensors(*m, parse_no_decay("norm,bias"));
  CHECK(norm.size() == 2);  // BN weight and bias
  CHECK(bias.size() == 2);  // BN bias and the linear bias
  CHECK(both.size() == 3);
  const std::vector<float> mask = decay_mask(*m, parse_no_decay("norm,bias"));
  REQUIRE(mask.size() == m->param_count());
  for (const ParamInfo& p : m->param_info()) {
    const bool exempt = std::find(both.begin(), both.end(), p.name) != both.end();
    CAPTURE(p.name);
    CHECK(exempt == (p.name.find("bias") != std::string::npos ||
                     p.name.find("batch_norm") != std::string::npos ||
                     p.name.find("bn") != std::string::npos));
    for (std::size_t i = 0; i < p.count; ++i) CHECK(mask[p.offset + i] == (exempt ? 0.f : 1.f));
  }
}

TEST_CASE("resnet18: every BatchNorm tensor and the fc bias are exempt", "[model][decay]") {
  const auto m = build("resnet18", {3, 32, 32}, 10);
  const std::vector<std::string> names = exempt_tensors(*m, parse_no_decay("norm,bias"));
  // 20 BatchNorms x (weight, bias) + fc.bias; no convolution has a bias.
  CHECK(names.size() == 41);
  CHECK(std::find(names.begin(), names.end(), "bn1.weight") != names.end());
  CHECK(std::find(names.begin(), names.end(), "fc.bias") != names.end());
  CHECK(std::find(names.begin(), names.end(), "conv1.weight") == names.end());
  CHECK(std::find(names.begin(), names.end(), "fc.weight") == names.end());
}
