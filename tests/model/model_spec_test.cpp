#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include "ringtrain/core/error.h"
#include "ringtrain/model/model_spec.h"

using namespace ringtrain;

namespace {
std::string parse_error(const std::string& text) {
  try {
    ModelSpec::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("model spec: mlp preset expands to flatten, linear and relu", "[spec]") {
  const ModelSpec s = ModelSpec::parse("mlp:784-512-512-10");
  CHECK(s.input_shape == std::vector<std::size_t>{784});
  REQUIRE(s.layers.size() == 6);
  CHECK(s.layers[0].kind == LayerKind::flatten);
  CHECK(s.layers[1].kind == LayerKind::linear);
  CHECK(s.layers[1].out == 512);
  CHECK(s.layers[2].kind == LayerKind::relu);
  CHECK(s.layers[5].out == 10);
  CHECK(s.to_string() ==
        "input(784); flatten; linear(out=512); relu; linear(out=512); relu; linear(out=10)");
  const ModelSpec two = ModelSpec::parse("mlp:784-10");
  CHECK(two.layers.size() == 2);
}

TEST_CASE("model spec: cnn preset", "[spec]") {
  const ModelSpec s = ModelSpec::parse("cnn");
  CHECK(s.input_shape == std::vector<std::size_t>{1, 28, 28});
  std::size_t convs = 0, pools = 0, linears = 0;
  for (const auto& l : s.layers) {
    convs += l.kind == LayerKind::conv2d;
    pools += l.kind == LayerKind::max_pool2d;
    linears += l.kind == LayerKind::linear;
  }
  CHECK(convs == 2);
  CHECK(pools >= 1);
  CHECK(linears == 2);
  CHECK(ModelSpec::parse(std::string(cnn_preset_text())) == s);
}

TEST_CASE("model spec: layer lists parse, with positional and named arguments", "[spec]") {
  const ModelSpec s = ModelSpec::parse(
      "# a comment line\n"
      "input(3, 32, 32)\n"
      "conv(16, 5, padding=2)   # trailing comment\n"
      "relu; maxpool(2)\n"
      "conv2d(out=8, kernel=3, stride=2); gelu\n"
      "flatten\n"
      "dropout(0.25); linear(10)\n");
  REQUIRE(s.layers.size() == 8);
  CHECK(s.input_shape == std::vector<std::size_t>{3, 32, 32});
  CHECK(s.layers[0].kind == LayerKind::conv2d);
  CHECK(s.layers[0].out == 16);
  CHECK(s.layers[0].kernel == 5);
  CHECK(s.layers[0].stride == 1);
  CHECK(s.layers[0].padding == 2);
  CHECK(s.layers[2].kind == LayerKind::max_pool2d);
  CHECK(s.layers[2].stride == 2);
  CHECK(s.layers[3].stride == 2);
  CHECK(s.layers[3].padding == 0);
  CHECK(s.layers[4].kind == LayerKind::gelu);
  CHECK(s.layers[6].p == 0.25);
  CHECK(s.layers[7].kind == LayerKind::linear);
  CHECK(s.layers[7].out == 10);
}

TEST_CASE("model spec: to_string round-trips and the hash is stable", "[spec]") {
  for (const char* text : {"mlp:784-512-512-10", "cnn", "mlp:3-1",
                           "conv2d(4, 3); relu; flatten; dropout(p=0.1); linear(out=2)",
                           "input(5); linear(3); gelu; dropout(0.333333); linear(2)"}) {
    const ModelSpec a = ModelSpec::parse(text);
    const ModelSpec b = ModelSpec::parse(a.to_string());
    INFO(text << " -> " << a.to_string());
    CHECK(a == b);
    CHECK(a.to_string() == b.to_string());
    CHECK(a.hash() == b.hash());
  }
  // The signature ranks compare: fixed for a given spec, different for another.
  CHECK(ModelSpec::parse("mlp:784-512-512-10").hash() == 0x08cfdd4de42245cdull);
  CHECK(ModelSpec::parse("mlp:784-512-512-10").hash() !=
        ModelSpec::parse("mlp:784-512-256-10").hash());
  CHECK(ModelSpec::parse("dropout(0.5); linear(2)").hash() !=
        ModelSpec::parse("dropout(0.25); linear(2)").hash());
}

TEST_CASE("model spec: @file", "[spec]") {
  const std::string path = "model_spec_test_file.txt";
  {
    std::ofstream f(path);
    f << "input(784)\nflatten\nlinear(out=32)\nrelu\n\nlinear(out=10)\n";
  }
  const ModelSpec s = ModelSpec::parse("@" + path);
  CHECK(s == ModelSpec::parse("mlp:784-32-10"));
  {
    std::ofstream f(path);
    f << "flatten\nlinear(out=32)\nrelux\n";
  }
  const std::string err = parse_error("@" + path);
  CHECK_THAT(err, Catch::Contains("unknown layer 'relux'") && Catch::Contains(path + ":3:1"));
  std::remove(path.c_str());
  CHECK_THAT(parse_error("@does/not/exist.txt"),
             Catch::Contains("'does/not/exist.txt' cannot be read"));
}

TEST_CASE("model spec: a bare name that is no preset says so, not 'unknown layer'", "[spec]") {
  const std::string typo = parse_error("resnet51");
  CHECK_THAT(typo, Catch::Contains("--model 'resnet51' is not a known preset (did you mean "
                                   "'resnet50'?)") &&
                       Catch::Contains("presets: cnn, mlp:784-512-10, resnet18") &&
                       Catch::Contains("ringtrain model list"));
  CHECK_THAT(typo, !Catch::Contains("unknown layer"));
  CHECK_THAT(parse_error("myres.txt"),
             Catch::Contains("--model 'myres.txt' is not a known preset; to read a model from "
                             "the file myres.txt, write --model @myres.txt"));
  CHECK_THAT(parse_error("transformer"), !Catch::Contains("did you mean"));
  // A single built-in layer stays a (one-layer) spec.
  CHECK(ModelSpec::parse("flatten").layers.size() == 1);
  // Messages name a file's spec by its file, a preset by its name.
  const std::string path = "model_spec_describe.txt";
  {
    std::ofstream f(path);
    f << "flatten\nlinear(out=10)\n";
  }
  CHECK(ModelSpec::parse("@" + path).describe() == "@" + path);
  std::remove(path.c_str());
  CHECK(ModelSpec::parse("resnet18").describe() == "resnet18");
  CHECK(ModelSpec::parse("flatten; linear(out=10)").describe() == "flatten; linear(out=10)");
}

TEST_CASE("model spec: malformed specs name the bad token", "[spec]") {
  using Catch::Contains;
  CHECK_THAT(parse_error("mlp:784-abc-10"), Contains("'abc'"));
  CHECK_THAT(parse_error("mlp:784-0-10"), Contains("'0'"));
  CHECK_THAT(parse_error("mlp:784"), Contains("at least an input and an output"));
  CHECK_THAT(parse_error("mlp"), Contains("layer sizes"));
  CHECK_THAT(parse_error("lineer(10)"), Contains("unknown layer 'lineer' at 1:1"));
  CHECK_THAT(parse_error("relu; linear(out=ten)"), Contains("bad value 'ten'") && Contains("1:18"));
  CHECK_THAT(parse_error("linear(10, 20)"), Contains("too many arguments") && Contains("'20'"));
  CHECK_THAT(parse_error("conv2d(out=3, size=3)"), Contains("unknown argument 'size'"));
  CHECK_THAT(parse_error("conv2d(out=3)"), Contains("needs 'kernel'"));
  CHECK_THAT(parse_error("linear(out=3"),
             Contains("expected ',' or ')'") && Contains("end of spec"));
  CHECK_THAT(parse_error("relu gelu"), Contains("unexpected 'gelu'"));
  CHECK_THAT(parse_error("dropout(1.5)"), Contains("'1.5'") && Contains("[0, 1)"));
  CHECK_THAT(parse_error("linear(out=2); input(3)"), Contains("before the first layer"));
  CHECK_THAT(parse_error("  "), Contains("empty"));
  CHECK_THAT(parse_error("# only a comment"), Contains("no layers"));
  CHECK_THAT(parse_error("relu\n  linear(out=4, out=5)"),
             Contains("given twice") && Contains("2:"));
}
