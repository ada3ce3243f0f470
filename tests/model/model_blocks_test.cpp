// Blocks and repeats in the model language: ResNet-20, ResNet-50 and Inception v3 written
// with them (launch/models/) give exactly the presets' graphs; parameters,
// nested blocks and names; the errors, each naming the node or block and its
// line:column.
#include <catch2/catch.hpp>

#include <cmath>

#include "ringtrain/core/error.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/presets.h"
#include "tests/model/test_data.h"

using namespace ringtrain;
using Catch::Contains;

namespace {

ModelOptions cpu_options(std::size_t max_batch = 2) {
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = 11;
  o.max_batch = max_batch;
  return o;
}

// A preset's graph as a plain spec (its to_string() is then the graph, not the name).
ModelSpec preset_graph(const char* name, std::size_t classes) {
  ModelSpec s = graph_preset(name, classes);
  s.preset.clear();
  return s;
}

std::string parse_error(const std::string& text) {
  try {
    ModelSpec::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string build_error(const std::string& text, std::vector<std::size_t> input) {
  try {
    Model::build(ModelSpec::parse(text), input, 3, cpu_options());
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

const std::string kModels = RINGTRAIN_SOURCE_DIR "/launch/models/";

}  // namespace

TEST_CASE("blocks: resnet20 in the language is the resnet20 preset", "[model][blocks]") {
  const ModelSpec text = ModelSpec::parse("@" + kModels + "resnet20.txt");
  const ModelSpec preset = preset_graph("resnet20", 10);
  CHECK(text.to_string() == preset.to_string());
  CHECK(text.hash() == preset.hash());
  CHECK(text == preset);
  CHECK(ModelSpec::parse(text.to_string()) == text);  // the expanded text round-trips

  // Built: the same parameters, names and, for the same weights, outputs.
  auto a = Model::build(text, {1, 12, 12}, 10, cpu_options());
  auto b = Model::build(graph_preset("resnet20", 10), {1, 12, 12}, 10, cpu_options());
  REQUIRE(a->param_count() == b->param_count());
  CHECK(a->param_count() == 272186);  // option-B shortcuts, 1 input channel, 10 classes
  REQUIRE(a->param_info().size() == b->param_info().size());
  for (std::size_t i = 0; i < a->param_info().size(); ++i)
    CHECK(a->param_info()[i].name == b->param_info()[i].name);
  CHECK(a->param_info().front().name == "conv1.weight");
  CHECK(a->param_info()[3].name == "layer1.0.conv1.weight");
  const std::vector<float> w = test::hashed_vector(7, a->param_count(), -0.2f, 0.2f);
  std::copy(w.begin(), w.end(), static_cast<float*>(a->params().ptr));
  std::copy(w.begin(), w.end(), static_cast<float*>(b->params().ptr));
  const std::vector<float> x = test::hashed_vector(8, 2 * 144);
  const std::vector<std::int32_t> labels{3, 7};
  for (const bool training : {true, false}) {
    const double la = a->forward(x.data(), labels.data(), 2, training).loss_sum;
    const double lb = b->forward(x.data(), labels.data(), 2, training).loss_sum;
    CHECK(la == lb);
    std::vector<float> za(20), zb(20);
    a->copy_logits(0, za.data(), za.size());
    b->copy_logits(0, zb.data(), zb.size());
    CHECK(za == zb);
  }
}

TEST_CASE("blocks: resnet50 in the language is the resnet50 preset", "[model][blocks]") {
  const ModelSpec text = ModelSpec::parse("@" + kModels + "resnet50.txt");
  const ModelSpec preset = preset_graph("resnet50", 1000);
  CHECK(text.layers.size() == preset.layers.size());
  CHECK(text.to_string() == preset.to_string());
  CHECK(text.hash() == preset.hash());
  auto m = Model::build(text, {3, 32, 32}, 1000, cpu_options(1));
  CHECK(m->param_count() == 25557032);  // torchvision's resnet50
}

TEST_CASE("blocks: inception3 in the language is the inception3 preset", "[model][blocks]") {
  // Branches reading the block's input, an unnamed concat taking the call's
  // name, 1x7 and 7x1 kernels, blocks calling blocks.
  const ModelSpec text = ModelSpec::parse("@" + kModels + "inception3.txt");
  const ModelSpec preset = preset_graph("inception3", 1000);
  CHECK(text.to_string() == preset.to_string());
  CHECK(text.hash() == preset.hash());
  auto m = Model::build(text, {3, 75, 75}, 1000, cpu_options(1));
  CHECK(m->param_count() == 23834568);  // torchvision's inception_v3(aux_logits=False)
}

TEST_CASE("blocks: parameters, defaults, products, nesting and names", "[model][blocks]") {
  const ModelSpec s = ModelSpec::parse(R"(
block pair(width, k=3) {
  c = conv2d(out=width*2, kernel=k, padding=1)
  r = relu
}
block twice(width) {
  first = pair(width)
  second = pair(first, width, k=1)
}
stem = conv2d(out=4, kernel=1)
t = twice(stem, 2)
repeat 2 { relu }
repeat i = 1..2 { extra{i} = pair(width=i) }
u = pair(t, width=1)
s = add(u, t.second, t.first.c)
flatten; linear(out=3)
)");
  std::vector<std::string> names;
  for (const LayerSpec& l : s.layers) names.push_back(l.name);
  CHECK(names == std::vector<std::string>{"stem", "t.first.c", "t.first.r", "t.second.c",
                                          "t.second.r", "", "", "extra1.c", "extra1.r", "extra2.c",
                                          "extra2.r", "u.c", "u.r", "s", "", ""});
  CHECK(s.layers[1].out == 4);        // width*2 with width=2
  CHECK(s.layers[1].kernel == 3);     // the default
  CHECK(s.layers[3].kernel == 1);     // k=1
  CHECK(s.layers[7].out == 2);        // i=1
  CHECK(s.layers[9].out == 4);        // i=2
  CHECK(s.layers[1].inputs.empty());  // reads the node just before
  // second reads first explicitly: first's output is the node before, so no name
  CHECK(s.layers[3].inputs.empty());
  CHECK(s.layers[11].inputs == std::vector<std::string>{"t.second.r"});  // 'u = pair(t, ...)'
  CHECK(s.layers[13].inputs == std::vector<std::string>{"u.r", "t.second.r", "t.first.c"});
  CHECK(ModelSpec::parse(s.to_string()) == s);
  // Built, when every node feeds the next: a block called twice, by name.
  auto m = Model::build(ModelSpec::parse("block pair(width, k=3) { c = conv2d(out=width*2, "
                                         "kernel=k, padding=1); r = relu }\n"
                                         "a = pair(1); b = pair(a, 1); s = add(a.c, b.r); "
                                         "flatten; linear(out=3)"),
                        {2, 4, 4}, 3, cpu_options());
  CHECK(m->layer_count() == 7);
  // An unnamed call's nodes take the block's name and a count; a call's last
  // unnamed node takes the call's name.
  const ModelSpec u = ModelSpec::parse(
      "block b(n) { c = conv2d(out=n, kernel=1); relu }; b(2); y = b(3); flatten; linear(out=3)");
  CHECK(u.layers[0].name == "b1.c");
  CHECK(u.layers[1].name.empty());
  CHECK(u.layers[2].name == "y.c");
  CHECK(u.layers[3].name == "y");
  // Blocks may be defined after their use; the old one-line form keeps working.
  CHECK(ModelSpec::parse("z = b; flatten; linear(out=3); block b() { relu }").layers[0].name ==
        "z");
}

TEST_CASE("blocks: errors name the block or node and line:column", "[model][blocks]") {
  const char* blk = "block b(w, k=1) {\n  c = conv2d(out=w, kernel=k)\n  r = relu\n}\n";
  // unknown block (an unknown layer; the blocks defined are listed)
  CHECK_THAT(parse_error(std::string(blk) + "y = bb(w=2)"),
             Contains("unknown layer 'bb' at 5:5") && Contains("blocks: b"));
  // wrong arguments
  CHECK_THAT(
      parse_error(std::string(blk) + "y = b(w=2, width=3)"),
      Contains("unknown argument 'width' to block 'b' at 5:18") && Contains("it takes w, k"));
  CHECK_THAT(parse_error(std::string(blk) + "y = b(k=2)"),
             Contains("block 'b' called at 5:5 needs 'w'"));
  CHECK_THAT(parse_error(std::string(blk) + "y = b(1, 2, 3)"),
             Contains("too many arguments to block 'b' at 5:13"));
  CHECK_THAT(parse_error(std::string(blk) + "y = b(1, w=2)"),
             Contains("argument 'w' of block 'b' given twice at 5:12"));
  CHECK_THAT(parse_error(std::string(blk) + "a = relu\ny = b(a, a, w=2)"),
             Contains("block 'b' at 6:5 takes one input, got 2"));
  CHECK_THAT(parse_error("block b(w) {\n  c = conv2d(out=w, kernel=x*2)\n}\nb(1)"),
             Contains("'x'") && Contains("2:28, in block 'b' called at 4:1"));
  // recursion, direct and through another block
  CHECK_THAT(
      parse_error("block a() { relu; a() }\ny = a()"),
      Contains("block 'a' calls itself at 1:19, in block 'a' called at 2:5") && Contains("a -> a"));
  CHECK_THAT(parse_error("block a() { b() }\nblock b() { a() }\na()"),
             Contains("block 'a' calls itself") && Contains("a -> b -> a"));
  // unknown input inside a block: outer names are not visible there
  CHECK_THAT(parse_error("stem = relu\nblock b() {\n  s = add(input, stem)\n}\nb()"),
             Contains("unknown input 'stem' of 'add' at 3:18, in block 'b' called at 5:1"));
  // cycles: a node reading itself or a later node
  CHECK_THAT(parse_error("a = relu\nb = add(a, b)"),
             Contains("node 'b' reads itself at 2:12") && Contains("no cycles"));
  CHECK_THAT(
      parse_error("a = add(input, c)\nc = relu(a)"),
      Contains("'a' at 1:16 reads 'c', which is defined later (at 2:1)") && Contains("no cycle"));
  CHECK_THAT(parse_error("block b() {\n  x = add(input, y)\n  y = relu\n}\nb()"),
             Contains("reads 'y', which is defined later (at 3:3)") &&
                 Contains("in block 'b' called at 5:1"));
  // a repeat whose names do not change, a block defined twice or inside another
  CHECK_THAT(parse_error("repeat 2 { a = relu }"),
             Contains("node 'a' defined twice (again at 1:12)"));
  CHECK_THAT(parse_error("block b() { relu }\nblock b() { gelu }"),
             Contains("block 'b' defined twice (at 1:1 and again at 2:1)"));
  CHECK_THAT(parse_error("block b() {\n  block c() { relu }\n}"),
             Contains("block definition at 2:3 inside a block or repeat"));
  CHECK_THAT(parse_error("block relu() { gelu }"),
             Contains("block 'relu' at 1:1 has the name of a layer"));
  CHECK_THAT(parse_error("block b() {\n  relu\n"), Contains("missing '}' for the '{' at 1:11"));
  CHECK_THAT(parse_error("relu }"), Contains("unexpected '}' at 1:6"));
  CHECK_THAT(parse_error("repeat i = 1-3 { relu }"), Contains("bad range '1-3' at 1:12"));
  CHECK_THAT(parse_error("layer{j} = relu"),
             Contains("unknown parameter 'j' in the name 'layer{j}' at 1:1"));
  CHECK_THAT(parse_error("block b() { input(3) }\nb()"),
             Contains("'input' at 1:13, in block 'b' called at 2:1"));
  // shape mismatch: Model::build names the node, where it was written and the call
  CHECK_THAT(build_error("block b(w) {\n  c = conv2d(out=w, kernel=1)\n  s = add(c, input)\n}\n"
                         "y = b(4)\nflatten; linear(out=3)",
                         {2, 3, 3}),
             Contains("node 'y.s'") && Contains("at 3:7, in block 'b' called at 5:5") &&
                 Contains("[4, 3, 3]") && Contains("[2, 3, 3]"));
}
