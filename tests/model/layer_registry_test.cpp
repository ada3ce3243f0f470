// Registered layer types: named in a spec like built-ins, canonical text and
// hash, built by Model::build through the factory, clear errors for bad names,
// and the public gradient check (which must also catch a wrong backward).
#include <catch2/catch.hpp>

#include "ringtrain/core/error.h"
#include "ringtrain/model/gradient_check.h"
#include "ringtrain/model/layer_registry.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"

using namespace ringtrain;

namespace {

// y = scale * x * x elementwise, one parameter per feature; `wrong` breaks its
// backward on purpose.
class SquareLayer final : public Layer {
 public:
  SquareLayer(std::string name, const Shape& input, bool wrong)
      : Layer(std::move(name), input, input), n_(input.numel()), wrong_(wrong) {}
  std::vector<ParamDesc> param_descs() const override { return {{"scale", Shape{n_}, 0, 1.0f}}; }
  void bind(float* params, float* grads) override {
    scale_ = params;
    dscale_ = grads;
  }
  void forward(const float* x, float* y, std::size_t batch, bool) override {
    for (std::size_t i = 0; i < batch * n_; ++i) y[i] = scale_[i % n_] * x[i] * x[i];
  }
  void backward(const float* x, const float*, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override {
    if (!accumulate)
      for (std::size_t j = 0; j < n_; ++j) dscale_[j] = 0;
    for (std::size_t i = 0; i < batch * n_; ++i) {
      dscale_[i % n_] += dy[i] * x[i] * x[i];
      if (dx) dx[i] = dy[i] * scale_[i % n_] * (wrong_ ? 1.0f : 2.0f) * x[i];
    }
  }

 private:
  std::size_t n_;
  bool wrong_;
  float* scale_ = nullptr;
  float* dscale_ = nullptr;
};

void register_square() {
  if (LayerRegistry::global().find("square") != nullptr) return;
  LayerType t;
  t.name = "square";
  t.arg_names = {"wrong"};
  t.make = [](const LayerArgs& args, const LayerBuild& b) -> std::unique_ptr<Layer> {
    return std::make_unique<SquareLayer>(b.name, b.input, args.count("wrong", 0) != 0);
  };
  LayerRegistry::global().add(t);
}

}  // namespace

TEST_CASE("a registered layer type is parsed, printed and hashed like a built-in") {
  register_square();
  const ModelSpec a = ModelSpec::parse("flatten; square; linear(out=3)");
  REQUIRE(a.layers.size() == 3);
  CHECK(a.layers[1].kind == LayerKind::custom);
  CHECK(a.layers[1].type == "square");
  CHECK(a.to_string() == "flatten; square; linear(out=3)");
  const ModelSpec b = ModelSpec::parse("flatten; SQUARE(wrong=1); linear(out=3)");
  CHECK(b.to_string() == "flatten; square(wrong=1); linear(out=3)");
  CHECK(ModelSpec::parse(b.to_string()) == b);
  CHECK(a.hash() != b.hash());
  CHECK(ModelSpec::parse("flatten; square(1); linear(out=3)") == b);
  CHECK_THROWS_WITH(ModelSpec::parse("square(scale=2)"),
                    Catch::Contains("unknown argument 'scale' to 'square'"));
  CHECK_THROWS_WITH(ModelSpec::parse("square(1, 2)"), Catch::Contains("too many arguments"));
  CHECK_THROWS_WITH(ModelSpec::parse("cube"), Catch::Contains("known: linear") &&
                                                  Catch::Contains("square") &&
                                                  Catch::Contains("--plugin"));
}

TEST_CASE("Model::build makes registered layers, named by their type") {
  register_square();
  ModelOptions options;
  options.max_batch = 4;
  auto model = Model::build(ModelSpec::parse("flatten; square; linear(out=3)"), {2, 2}, 3, options);
  REQUIRE(model->param_info().size() == 3);
  CHECK(model->param_info()[0].name == "square1.scale");
  CHECK(model->param_info()[0].count == 4);
  // fan_in 0 with a constant: the scale starts at 1.
  const float* p = static_cast<const float*>(model->params().ptr);
  for (std::size_t i = 0; i < 4; ++i) CHECK(p[i] == 1.0f);
  CHECK_THROWS_WITH(
      Model::build(ModelSpec::parse("flatten; square(wrong=x); linear(out=3)"), {4}, 3, options),
      Catch::Contains("bad value 'x' for 'wrong'"));
}

TEST_CASE("an added type that does not declare cuda_graph is named for --cuda-graph on") {
  register_square();
  if (LayerRegistry::global().find("square_graphed") == nullptr) {
    LayerType t;
    t.name = "square_graphed";
    t.cuda_graph = true;
    t.make = [](const LayerArgs&, const LayerBuild& b) -> std::unique_ptr<Layer> {
      return std::make_unique<SquareLayer>(b.name, b.input, false);
    };
    LayerRegistry::global().add(t);
  }
  ModelOptions options;
  options.max_batch = 2;
  auto added = Model::build(ModelSpec::parse("flatten; square; linear(out=3)"), {2, 2}, 3, options);
  CHECK(added->layer_type_unsafe_in_cuda_graph() == "'square' from program");
  auto graphed =
      Model::build(ModelSpec::parse("flatten; square_graphed; linear(out=3)"), {2, 2}, 3, options);
  CHECK(graphed->layer_type_unsafe_in_cuda_graph().empty());
  auto builtin = Model::build(ModelSpec::parse("flatten; linear(out=3)"), {2, 2}, 3, options);
  CHECK(builtin->layer_type_unsafe_in_cuda_graph().empty());
}

TEST_CASE("the registry refuses malformed, built-in and duplicate names") {
  register_square();
  LayerType t;
  t.make = [](const LayerArgs&, const LayerBuild& b) -> std::unique_ptr<Layer> {
    return std::make_unique<SquareLayer>(b.name, b.input, false);
  };
  t.name = "relu";
  CHECK_THROWS_WITH(LayerRegistry::global().add(t), Catch::Contains("built-in"));
  t.name = "Bad-Name";
  CHECK_THROWS_WITH(LayerRegistry::global().add(t), Catch::Contains("lower-case"));
  t.name = "square";
  CHECK_THROWS_WITH(LayerRegistry::global().add(t), Catch::Contains("registered twice"));
  const auto before = LayerRegistry::global().signature();
  t.name = "square_two";
  LayerRegistry::global().add(t);
  CHECK(LayerRegistry::global().signature() != before);
}

TEST_CASE("the public gradient check passes a right backward and names a wrong one") {
  SquareLayer right("square1", Shape{5}, false);
  const GradientCheckResult ok = check_layer_gradients(right);
  CHECK(ok.ok);
  CHECK(ok.checked == 2 * 5 + 5);
  SquareLayer wrong("square1", Shape{5}, true);
  const GradientCheckResult bad = check_layer_gradients(wrong);
  CHECK_FALSE(bad.ok);
  // Only dx is wrong (where it is large enough to tell); the parameter gradient is right.
  CHECK(bad.mismatches > 0);
  CHECK(bad.mismatches <= 10);
  CHECK_THAT(bad.report, Catch::Contains("square1 dx["));
  CHECK_THAT(bad.report, !Catch::Contains("dscale"));
}

TEST_CASE("the built-in layers are registered types, in the same registry") {
  const LayerRegistry& r = LayerRegistry::global();
  for (const char* name : {"linear", "conv2d", "max_pool2d", "relu", "gelu", "flatten", "dropout",
                           "avg_pool2d", "global_avg_pool", "batch_norm", "add", "concat"}) {
    const LayerType* t = r.find(name);
    REQUIRE(t != nullptr);
    CHECK(t->origin == "built-in");
    CHECK(t->kind != LayerKind::custom);
    CHECK(r.find(t->kind) == t);
    CHECK(layer_kind_name(t->kind) == name);
    CHECK(t->parse);
    CHECK(t->make);
  }
  CHECK(r.find("bn") == r.find("batch_norm"));  // spellings are aliases
  CHECK(r.find("fc") == r.find("linear"));
  CHECK(r.find("add")->min_inputs == 2);
  CHECK(r.names().front() == "linear");
  // An added type may not take a built-in's spelling either.
  LayerType t;
  t.make = [](const LayerArgs&, const LayerBuild& b) -> std::unique_ptr<Layer> {
    return std::make_unique<SquareLayer>(b.name, b.input, false);
  };
  t.name = "bn";
  CHECK_THROWS_WITH(LayerRegistry::global().add(t), Catch::Contains("built-in"));
  t.name = "square_alias";
  t.aliases = {"conv"};
  CHECK_THROWS_WITH(LayerRegistry::global().add(t),
                    Catch::Contains("'conv'") && Catch::Contains("built-in"));
  // The start-up signature covers the added types only: a registry without any
  // has the empty signature, whatever the built-ins are.
  CHECK(LayerRegistry().signature() == 0xcbf29ce484222325ull);
}

TEST_CASE("an added type can check its arguments at parse time and read several inputs") {
  if (LayerRegistry::global().find("square_checked") == nullptr) {
    LayerType t;
    t.name = "square_checked";
    t.arg_names = {"wrong"};
    t.make = [](const LayerArgs&, const LayerBuild& b) -> std::unique_ptr<Layer> {
      return std::make_unique<SquareLayer>(b.name, b.input, b.spec->p != 0);
    };
    // Typed at parse time, like a built-in: the flag kept in LayerSpec::p.
    t.parse = [](const std::vector<SpecArg>& args, const std::string& at, LayerSpec& spec) {
      if (args[0].value.empty()) return;
      if (args[0].value != "0" && args[0].value != "1")
        throw Error("square_checked at " + at + ": 'wrong' at " + args[0].where + " is 0 or 1");
      spec.p = args[0].value == "1" ? 0.5 : 0.0;
    };
    t.canonical = [](const LayerSpec& spec) {
      return spec.p != 0 ? std::vector<std::string>{"wrong=1"} : std::vector<std::string>{};
    };
    LayerRegistry::global().add(t);
  }
  const ModelSpec s = ModelSpec::parse("flatten; square_checked(wrong=1); linear(out=3)");
  CHECK(s.layers[1].kind == LayerKind::custom);
  CHECK(s.layers[1].type == "square_checked");
  CHECK(s.to_string() == "flatten; square_checked(wrong=1); linear(out=3)");
  CHECK(ModelSpec::parse(s.to_string()) == s);
  CHECK_THROWS_WITH(ModelSpec::parse("flatten;\nsquare_checked(wrong=7)"),
                    Catch::Contains("'wrong' at 2:22 is 0 or 1"));
  CHECK_THROWS_WITH(ModelSpec::parse("a = relu; square_checked(a, a)"),
                    Catch::Contains("takes one input, got 2"));
  ModelOptions options;
  options.max_batch = 2;
  auto model = Model::build(s, {2, 2}, 3, options);
  CHECK(model->param_info()[0].name == "square_checked1.scale");
}
