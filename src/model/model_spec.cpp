// The model spec parser: presets, @file, and the layer-list language (see
// model_spec.h). Errors name the offending token with its line:column, so a
// typo in a 30-line file is found at once.
#include "ringtrain/model/model_spec.h"

#include <cctype>
#include <charconv>
#include <fstream>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "ringtrain/core/check.h"
#include "ringtrain/model/layer_registry.h"
#include "ringtrain/model/presets.h"

namespace ringtrain {

namespace {

constexpr std::string_view kCnnPreset =
    "input(1, 28, 28); conv2d(out=32, kernel=3, stride=1, padding=1); relu; "
    "max_pool2d(kernel=2, stride=2); conv2d(out=64, kernel=3, stride=1, padding=1); relu; "
    "max_pool2d(kernel=2, stride=2); flatten; linear(out=128); relu; linear(out=10)";

struct KindName {
  std::string_view name;
  LayerKind kind;
};
constexpr KindName kKindNames[] = {
    {"linear", LayerKind::linear},
    {"conv2d", LayerKind::conv2d},
    {"max_pool2d", LayerKind::max_pool2d},
    {"relu", LayerKind::relu},
    {"gelu", LayerKind::gelu},
    {"flatten", LayerKind::flatten},
    {"dropout", LayerKind::dropout},
    {"avg_pool2d", LayerKind::avg_pool2d},
    {"global_avg_pool", LayerKind::global_avg_pool},
    {"batch_norm", LayerKind::batch_norm},
    {"add", LayerKind::add},
    {"concat", LayerKind::concat},
    {"token_embedding", LayerKind::token_embedding},
    {"position_embedding", LayerKind::position_embedding},
    {"layer_norm", LayerKind::layer_norm},
    {"causal_self_attention", LayerKind::causal_self_attention},
    {"gelu_tanh", LayerKind::gelu_tanh},
    {"lm_head", LayerKind::lm_head},
    // accepted spellings; to_string() writes the names above
    {"conv", LayerKind::conv2d},
    {"maxpool", LayerKind::max_pool2d},
    {"maxpool2d", LayerKind::max_pool2d},
    {"fc", LayerKind::linear},
    {"avgpool", LayerKind::avg_pool2d},
    {"avgpool2d", LayerKind::avg_pool2d},
    {"batchnorm", LayerKind::batch_norm},
    {"bn", LayerKind::batch_norm},
};

// ---------------------------------------------------------------------------
// A cursor over the text that knows its line and column.
// ---------------------------------------------------------------------------
class Cursor {
 public:
  Cursor(std::string_view text, std::string origin) : text_(text), origin_(std::move(origin)) {}

  bool done() const { return pos_ >= text_.size(); }
  char peek() const { return done() ? '\0' : text_[pos_]; }
  std::size_t pos() const { return pos_; }

  void advance() {
    if (text_[pos_] == '\n') {
      ++line_;
      col_ = 1;
    } else {
      ++col_;
    }
    ++pos_;
  }
  // Spaces, tabs and comments; newlines too when `newlines`.
  void skip_blank(bool newlines) {
    while (!done()) {
      const char c = peek();
      if (c == '#') {
        while (!done() && peek() != '\n') advance();
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        advance();
      } else {
        break;
      }
    }
  }
  // A run of characters that may form a name or a number.
  std::string_view word() {
    const std::size_t start = pos_;
    while (!done()) {
      const char c = peek();
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
          c == '+')
        advance();
      else
        break;
    }
    return text_.substr(start, pos_ - start);
  }
  // The token at the cursor, for error messages.
  std::string token_here() {
    Cursor probe = *this;
    std::string_view w = probe.word();
    if (!w.empty()) return std::string(w);
    if (done()) return "end of spec";
    return std::string(1, peek());
  }
  std::string where() const { return fmt::format("{}{}:{}", origin_, line_, col_); }
  struct Mark {
    std::size_t line, col;
  };
  Mark mark() const { return {line_, col_}; }
  std::string where(Mark m) const { return fmt::format("{}{}:{}", origin_, m.line, m.col); }

 private:
  std::string_view text_;
  std::string origin_;
  std::size_t pos_ = 0, line_ = 1, col_ = 1;
};

[[noreturn]] void fail(const std::string& message) {
  RT_CHECK(false, "model spec: {}", message);
  __builtin_unreachable();
}

std::string known_kinds() {
  std::string s;
  for (const auto& k : kKindNames) s += (s.empty() ? "" : ", ") + std::string(k.name);
  for (const std::string& name : LayerRegistry::global().names()) s += ", " + name;
  return s + ", input";
}

std::size_t parse_count(std::string_view token, std::string_view what, const std::string& where,
                        bool allow_zero) {
  std::size_t v = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || end != token.data() + token.size() || token.empty())
    fail(fmt::format("bad value '{}' for {} at {}: expected a whole number", token, what, where));
  if (!allow_zero && v == 0)
    fail(fmt::format("{} must be at least 1, got '{}' at {}", what, token, where));
  return v;
}

double parse_probability(std::string_view token, std::string_view what, const std::string& where) {
  double v = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || end != token.data() + token.size() || token.empty())
    fail(fmt::format("bad value '{}' for {} at {}: expected a number", token, what, where));
  if (!(v >= 0.0 && v < 1.0))
    fail(fmt::format("{} must be in [0, 1), got '{}' at {}", what, token, where));
  return v;
}

double parse_real(std::string_view token, std::string_view what, const std::string& where,
                  double lo, double hi) {
  double v = 0;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || end != token.data() + token.size() || token.empty())
    fail(fmt::format("bad value '{}' for {} at {}: expected a number", token, what, where));
  if (!(v >= lo && v <= hi))
    fail(fmt::format("{} must be in [{}, {}], got '{}' at {}", what, lo, hi, token, where));
  return v;
}

bool parse_flag(std::string_view token, std::string_view what, const std::string& where) {
  if (token == "1" || token == "true") return true;
  if (token == "0" || token == "false") return false;
  fail(fmt::format("bad value '{}' for {} at {}: expected 0 or 1", token, what, where));
}

// A node name: a letter or '_' first, then letters, digits, '_' and '.'
// (torchvision's module paths: layer1.0.conv1).
bool is_identifier(std::string_view token) {
  if (token.empty() || !(std::isalpha(static_cast<unsigned char>(token[0])) || token[0] == '_') ||
      token.back() == '.')
    return false;
  for (char ch : token)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.')) return false;
  return true;
}

// "7" -> (7, kSquare); "1x7" -> (1, 7): a size along the height and the width.
std::pair<std::size_t, std::size_t> parse_pair(std::string_view token, std::string_view what,
                                               const std::string& where, bool allow_zero) {
  const std::size_t x = token.find('x');
  if (x == std::string_view::npos)
    return {parse_count(token, what, where, allow_zero), LayerSpec::kSquare};
  const std::size_t h = parse_count(token.substr(0, x), what, where, allow_zero);
  const std::size_t w = parse_count(token.substr(x + 1), what, where, allow_zero);
  return {h, h == w ? LayerSpec::kSquare : w};
}

std::string pair_text(std::size_t h, std::size_t w) {
  return w == LayerSpec::kSquare ? fmt::format("{}", h) : fmt::format("{}x{}", h, w);
}

struct Arg {
  std::string key;  // empty: positional
  std::string value;
  std::string where;
};

// "(a, key=b, ...)" after a layer name; the cursor sits on '('.
std::vector<Arg> parse_args(Cursor& c, std::string_view layer) {
  std::vector<Arg> args;
  c.advance();  // '('
  c.skip_blank(true);
  if (c.peek() == ')') {
    c.advance();
    return args;
  }
  while (true) {
    c.skip_blank(true);
    const std::string at = c.where();
    std::string_view first = c.word();
    if (first.empty())
      fail(
          fmt::format("unexpected '{}' in the arguments of '{}' at {}", c.token_here(), layer, at));
    Arg a;
    a.where = at;
    c.skip_blank(true);
    if (c.peek() == '=') {
      c.advance();
      c.skip_blank(true);
      a.key = std::string(first);
      a.where = c.where();
      std::string_view v = c.word();
      if (v.empty())
        fail(fmt::format("missing value for '{}' of '{}' at {} (found '{}')", a.key, layer, a.where,
                         c.token_here()));
      a.value = std::string(v);
    } else {
      a.value = std::string(first);
    }
    args.push_back(std::move(a));
    c.skip_blank(true);
    if (c.peek() == ',') {
      c.advance();
      continue;
    }
    if (c.peek() == ')') {
      c.advance();
      return args;
    }
    fail(fmt::format("expected ',' or ')' in the arguments of '{}' at {}, found '{}'", layer,
                     c.where(), c.token_here()));
  }
}

// Binds positional and named arguments to `keys` in order; returns the value
// per key ("" when absent).
std::vector<Arg> bind_args(const std::vector<Arg>& args,
                           std::initializer_list<std::string_view> keys, std::string_view layer,
                           const std::string& at) {
  std::vector<std::string_view> names(keys);
  std::vector<Arg> bound(names.size());
  std::size_t positional = 0;
  bool named_seen = false;
  for (const Arg& a : args) {
    std::size_t slot = names.size();
    if (a.key.empty()) {
      if (named_seen)
        fail(fmt::format("positional argument '{}' after a named one in '{}' at {}", a.value, layer,
                         a.where));
      slot = positional++;
      if (slot >= names.size())
        fail(fmt::format(
            "too many arguments to '{}' at {}: '{}' (it takes {})", layer, a.where, a.value,
            names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
    } else {
      named_seen = true;
      for (std::size_t i = 0; i < names.size(); ++i)
        if (names[i] == a.key) slot = i;
      if (slot == names.size())
        fail(fmt::format(
            "unknown argument '{}' to '{}' at {} (it takes {})", a.key, layer, a.where,
            names.empty() ? std::string("none") : fmt::format("{}", fmt::join(names, ", "))));
    }
    if (!bound[slot].value.empty())
      fail(fmt::format("argument '{}' of '{}' given twice at {}", names[slot], layer, a.where));
    bound[slot] = a;
  }
  (void)at;
  return bound;
}

const Arg& required(const std::vector<Arg>& bound, std::size_t i, std::string_view key,
                    std::string_view layer, const std::string& at) {
  if (bound[i].value.empty()) fail(fmt::format("'{}' at {} needs '{}'", layer, at, key));
  return bound[i];
}

// A registered layer type: its arguments bound to the names it declares; the
// values stay text, checked by the type's factory when the model is built.
LayerSpec parse_registered(const LayerType& type, const std::vector<Arg>& args,
                           const std::string& at) {
  std::vector<std::string_view> keys(type.arg_names.begin(), type.arg_names.end());
  std::vector<Arg> bound(keys.size());
  std::size_t positional = 0;
  for (const Arg& a : args) {
    std::size_t slot = keys.size();
    if (a.key.empty()) {
      slot = positional++;
    } else {
      for (std::size_t i = 0; i < keys.size(); ++i)
        if (keys[i] == a.key) slot = i;
    }
    if (slot >= keys.size())
      fail(fmt::format(
          "{} '{}' to '{}' at {} (it takes {})",
          a.key.empty() ? "too many arguments:" : "unknown argument",
          a.key.empty() ? a.value : a.key, type.name, a.where,
          keys.empty() ? std::string("none") : fmt::format("{}", fmt::join(keys, ", "))));
    if (!bound[slot].value.empty())
      fail(fmt::format("argument '{}' of '{}' given twice at {}", keys[slot], type.name, a.where));
    bound[slot] = a;
  }
  (void)at;
  LayerSpec l;
  l.kind = LayerKind::custom;
  l.type = type.name;
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (!bound[i].value.empty()) l.args.emplace_back(type.arg_names[i], bound[i].value);
  return l;
}

ModelSpec parse_layer_list(std::string_view text, const std::string& origin) {
  ModelSpec spec;
  Cursor c(text, origin);
  bool input_seen = false;
  std::set<std::string> defined;           // named nodes so far
  std::vector<std::string> defined_order;  // the same, for messages
  while (true) {
    c.skip_blank(true);
    while (c.peek() == ';') {
      c.advance();
      c.skip_blank(true);
    }
    if (c.done()) break;
    auto mark = c.mark();
    std::string at = c.where(mark);
    std::string_view name = c.word();
    if (name.empty())
      fail(fmt::format("unexpected '{}' at {}: expected a layer name", c.token_here(), at));
    c.skip_blank(false);
    std::string node_name;
    if (c.peek() == '=') {
      // "name = layer(...)": a named node
      node_name = std::string(name);
      if (!is_identifier(node_name))
        fail(
            fmt::format("bad node name '{}' at {}: use letters, digits, '_' and '.', starting "
                        "with a letter",
                        node_name, at));
      // A node may share a layer type's name (torchvision's `fc`): a node is
      // only ever read as an argument, a type only ever written as a statement.
      if (node_name == "input")
        fail(fmt::format("node name 'input' at {} is taken: it is the model's input", at));
      if (defined.count(node_name) != 0)
        fail(fmt::format("node '{}' defined twice (again at {})", node_name, at));
      c.advance();
      c.skip_blank(false);
      mark = c.mark();
      at = c.where(mark);
      name = c.word();
      if (name.empty())
        fail(fmt::format("unexpected '{}' at {}: expected a layer after '{} ='", c.token_here(), at,
                         node_name));
      c.skip_blank(false);
    }
    std::string lower(name);
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    std::vector<Arg> args;
    if (c.peek() == '(') args = parse_args(c, name);
    // Leading positional arguments that are names are the node's inputs.
    std::vector<std::string> inputs;
    if (lower != "input") {
      std::size_t taken = 0;
      for (; taken < args.size(); ++taken) {
        const Arg& a = args[taken];
        if (!a.key.empty() || !is_identifier(a.value) || a.value == "true" || a.value == "false")
          break;
        if (a.value != "input" && defined.count(a.value) == 0)
          fail(fmt::format("unknown input '{}' of '{}' at {}: name an earlier node or 'input'{}",
                           a.value, name, a.where,
                           defined.empty() ? std::string()
                                           : fmt::format(" (defined so far: {})",
                                                         fmt::join(defined_order, ", "))));
        inputs.push_back(a.value);
      }
      args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(taken));
    }

    if (lower == "input") {
      if (!node_name.empty()) fail(fmt::format("'input' at {} cannot be named", at));
      if (input_seen) fail(fmt::format("'input' given twice (again at {})", at));
      if (!spec.layers.empty())
        fail(fmt::format("'input' at {} must come before the first layer", at));
      if (args.empty() || args.size() > 4)
        fail(fmt::format("'input' at {} takes 1 to 4 dimensions, got {}", at, args.size()));
      for (const Arg& a : args) {
        if (!a.key.empty())
          fail(fmt::format("'input' takes no named arguments ('{}' at {})", a.key, a.where));
        spec.input_shape.push_back(parse_count(a.value, "an input dimension", a.where, false));
      }
      input_seen = true;
    } else {
      const KindName* found = nullptr;
      for (const auto& k : kKindNames)
        if (k.name == lower) found = &k;
      const LayerType* registered = found ? nullptr : LayerRegistry::global().find(lower);
      if (found == nullptr && registered == nullptr)
        fail(
            fmt::format("unknown layer '{}' at {} (known: {}; a layer from a plugin needs "
                        "--plugin)",
                        name, at, known_kinds()));
      if (registered != nullptr) {
        spec.layers.push_back(parse_registered(*registered, args, at));
        if (inputs.size() > 1)
          fail(fmt::format("'{}' at {} takes one input, got {}", name, at, inputs.size()));
      } else {
        LayerSpec l;
        l.kind = found->kind;
        const std::string kind_name(layer_kind_name(l.kind));
        switch (l.kind) {
          case LayerKind::linear: {
            auto b = bind_args(args, {"out"}, kind_name, at);
            const Arg& out = required(b, 0, "out", kind_name, at);
            l.out = parse_count(out.value, "linear 'out'", out.where, false);
            break;
          }
          case LayerKind::conv2d: {
            auto b = bind_args(args, {"out", "kernel", "stride", "padding", "bias"}, kind_name, at);
            const Arg& out = required(b, 0, "out", kind_name, at);
            const Arg& kernel = required(b, 1, "kernel", kind_name, at);
            l.out = parse_count(out.value, "conv2d 'out'", out.where, false);
            std::tie(l.kernel, l.kernel_w) =
                parse_pair(kernel.value, "conv2d 'kernel'", kernel.where, false);
            if (!b[2].value.empty())
              std::tie(l.stride, l.stride_w) =
                  parse_pair(b[2].value, "conv2d 'stride'", b[2].where, false);
            else
              l.stride = 1;
            if (!b[3].value.empty())
              std::tie(l.padding, l.padding_w) =
                  parse_pair(b[3].value, "conv2d 'padding'", b[3].where, true);
            if (!b[4].value.empty()) l.bias = parse_flag(b[4].value, "conv2d 'bias'", b[4].where);
            break;
          }
          case LayerKind::max_pool2d:
          case LayerKind::avg_pool2d: {
            auto b = bind_args(args, {"kernel", "stride", "padding"}, kind_name, at);
            const Arg& kernel = required(b, 0, "kernel", kind_name, at);
            l.kernel = parse_count(kernel.value, kind_name + " 'kernel'", kernel.where, false);
            l.stride = b[1].value.empty()
                           ? l.kernel
                           : parse_count(b[1].value, kind_name + " 'stride'", b[1].where, false);
            l.padding = b[2].value.empty()
                            ? 0
                            : parse_count(b[2].value, kind_name + " 'padding'", b[2].where, true);
            if (2 * l.padding > l.kernel)
              fail(fmt::format("{} padding {} at {} must be at most half the kernel {}", kind_name,
                               l.padding, b[2].where, l.kernel));
            break;
          }
          case LayerKind::batch_norm: {
            auto b = bind_args(args, {"eps", "momentum", "affine", "zero_init"}, kind_name, at);
            if (!b[0].value.empty())
              l.eps = parse_real(b[0].value, "batch_norm 'eps'", b[0].where, 1e-12, 1.0);
            if (!b[1].value.empty())
              l.momentum = parse_real(b[1].value, "batch_norm 'momentum'", b[1].where, 0.0, 1.0);
            if (!b[2].value.empty())
              l.affine = parse_flag(b[2].value, "batch_norm 'affine'", b[2].where);
            if (!b[3].value.empty())
              l.zero_init = parse_flag(b[3].value, "batch_norm 'zero_init'", b[3].where);
            if (l.zero_init && !l.affine)
              fail(fmt::format("batch_norm at {}: zero_init needs affine=1", at));
            break;
          }
          case LayerKind::add: {
            auto b = bind_args(args, {"scale"}, kind_name, at);
            if (!b[0].value.empty())
              l.scale = parse_real(b[0].value, "add 'scale'", b[0].where, -1e30, 1e30);
            break;
          }
          case LayerKind::concat:
          case LayerKind::global_avg_pool:
            bind_args(args, {}, kind_name, at);
            break;
          case LayerKind::dropout: {
            auto b = bind_args(args, {"p"}, kind_name, at);
            const Arg& p = required(b, 0, "p", kind_name, at);
            l.p = parse_probability(p.value, "dropout 'p'", p.where);
            break;
          }
          case LayerKind::relu:
          case LayerKind::gelu:
          case LayerKind::gelu_tanh:
          case LayerKind::flatten:
            bind_args(args, {}, kind_name, at);
            break;
          case LayerKind::token_embedding: {
            auto b = bind_args(args, {"vocab", "dim"}, kind_name, at);
            const Arg& vocab = required(b, 0, "vocab", kind_name, at);
            const Arg& dim = required(b, 1, "dim", kind_name, at);
            l.vocab = parse_count(vocab.value, "token_embedding 'vocab'", vocab.where, false);
            l.out = parse_count(dim.value, "token_embedding 'dim'", dim.where, false);
            break;
          }
          case LayerKind::position_embedding: {
            auto b = bind_args(args, {"context"}, kind_name, at);
            const Arg& context = required(b, 0, "context", kind_name, at);
            l.context =
                parse_count(context.value, "position_embedding 'context'", context.where, false);
            break;
          }
          case LayerKind::layer_norm: {
            auto b = bind_args(args, {"eps"}, kind_name, at);
            if (!b[0].value.empty())
              l.eps = parse_real(b[0].value, "layer_norm 'eps'", b[0].where, 1e-12, 1.0);
            break;
          }
          case LayerKind::causal_self_attention: {
            auto b = bind_args(args, {"heads"}, kind_name, at);
            const Arg& heads = required(b, 0, "heads", kind_name, at);
            l.heads = parse_count(heads.value, "causal_self_attention 'heads'", heads.where, false);
            break;
          }
          case LayerKind::lm_head: {
            auto b = bind_args(args, {"tied"}, kind_name, at);
            const Arg& tied = required(b, 0, "tied", kind_name, at);
            if (!is_identifier(tied.value))
              fail(fmt::format("lm_head 'tied' at {} must name the token_embedding node, got '{}'",
                               tied.where, tied.value));
            l.tied = tied.value;
            break;
          }
          case LayerKind::custom:
            break;  // found through the registry above
        }
        const bool many = l.kind == LayerKind::add || l.kind == LayerKind::concat;
        if (many && inputs.size() < 2)
          fail(fmt::format("'{}' at {} needs at least two inputs, as in {}(a, b)", name, at,
                           kind_name));
        if (!many && inputs.size() > 1)
          fail(fmt::format("'{}' at {} takes one input, got {}", name, at, inputs.size()));
        spec.layers.push_back(l);
      }
      spec.layers.back().name = node_name;
      spec.layers.back().inputs = std::move(inputs);
      if (!node_name.empty()) {
        defined.insert(node_name);
        defined_order.push_back(node_name);
      }
    }
    c.skip_blank(false);
    if (c.done()) break;
    if (c.peek() == ';' || c.peek() == '\n') {
      c.advance();
      continue;
    }
    fail(fmt::format("unexpected '{}' at {} after '{}': separate layers with ';' or a new line",
                     c.token_here(), c.where(), name));
  }
  if (spec.layers.empty())
    fail(fmt::format("{}no layers given", origin.empty() ? "" : origin + " "));
  return spec;
}

ModelSpec parse_mlp(std::string_view sizes, std::string_view whole) {
  ModelSpec spec;
  std::vector<std::size_t> dims;
  std::size_t start = 0;
  while (true) {
    const std::size_t dash = sizes.find('-', start);
    const std::string_view token =
        sizes.substr(start, dash == std::string_view::npos ? dash : dash - start);
    dims.push_back(parse_count(token, fmt::format("an mlp layer size in '{}'", whole),
                               fmt::format("character {}", 4 + start + 1), false));
    if (dash == std::string_view::npos) break;
    start = dash + 1;
  }
  if (dims.size() < 2)
    fail(fmt::format("'{}' needs at least an input and an output size, as in mlp:784-512-10",
                     whole));
  spec.input_shape = {dims.front()};
  spec.layers.push_back({LayerKind::flatten});
  for (std::size_t i = 1; i < dims.size(); ++i) {
    LayerSpec l;
    l.kind = LayerKind::linear;
    l.out = dims[i];
    spec.layers.push_back(l);
    if (i + 1 < dims.size()) spec.layers.push_back({LayerKind::relu});
  }
  return spec;
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

std::string_view layer_kind_name(LayerKind kind) {
  switch (kind) {
    case LayerKind::linear:
      return "linear";
    case LayerKind::conv2d:
      return "conv2d";
    case LayerKind::max_pool2d:
      return "max_pool2d";
    case LayerKind::relu:
      return "relu";
    case LayerKind::gelu:
      return "gelu";
    case LayerKind::flatten:
      return "flatten";
    case LayerKind::dropout:
      return "dropout";
    case LayerKind::custom:
      return "custom";
    case LayerKind::avg_pool2d:
      return "avg_pool2d";
    case LayerKind::global_avg_pool:
      return "global_avg_pool";
    case LayerKind::batch_norm:
      return "batch_norm";
    case LayerKind::add:
      return "add";
    case LayerKind::concat:
      return "concat";
    case LayerKind::token_embedding:
      return "token_embedding";
    case LayerKind::position_embedding:
      return "position_embedding";
    case LayerKind::layer_norm:
      return "layer_norm";
    case LayerKind::causal_self_attention:
      return "causal_self_attention";
    case LayerKind::gelu_tanh:
      return "gelu_tanh";
    case LayerKind::lm_head:
      return "lm_head";
  }
  return "?";
}

namespace {
// The layer's own arguments, canonical, without inputs or name.
std::vector<std::string> canonical_args(const LayerSpec& l) {
  switch (l.kind) {
    case LayerKind::linear:
      return {fmt::format("out={}", l.out)};
    case LayerKind::conv2d: {
      std::vector<std::string> a{fmt::format("out={}", l.out),
                                 fmt::format("kernel={}", pair_text(l.kernel, l.kernel_w)),
                                 fmt::format("stride={}", pair_text(l.stride, l.stride_w)),
                                 fmt::format("padding={}", pair_text(l.padding, l.padding_w))};
      if (!l.bias) a.push_back("bias=0");
      return a;
    }
    case LayerKind::max_pool2d:
    case LayerKind::avg_pool2d: {
      std::vector<std::string> a{fmt::format("kernel={}", l.kernel),
                                 fmt::format("stride={}", l.stride)};
      if (l.padding > 0) a.push_back(fmt::format("padding={}", l.padding));
      return a;
    }
    case LayerKind::dropout:
      return {fmt::format("p={}", l.p)};
    case LayerKind::batch_norm: {
      std::vector<std::string> a;
      if (l.eps != 1e-5) a.push_back(fmt::format("eps={}", l.eps));
      if (l.momentum != 0.1) a.push_back(fmt::format("momentum={}", l.momentum));
      if (!l.affine) a.push_back("affine=0");
      if (l.zero_init) a.push_back("zero_init=1");
      return a;
    }
    case LayerKind::add:
      if (l.scale != 1.0) return {fmt::format("scale={}", l.scale)};
      return {};
    case LayerKind::custom: {
      std::vector<std::string> a;
      for (const auto& [k, v] : l.args) a.push_back(fmt::format("{}={}", k, v));
      return a;
    }
    case LayerKind::token_embedding:
      return {fmt::format("vocab={}", l.vocab), fmt::format("dim={}", l.out)};
    case LayerKind::position_embedding:
      return {fmt::format("context={}", l.context)};
    case LayerKind::layer_norm:
      if (l.eps != 1e-5) return {fmt::format("eps={}", l.eps)};
      return {};
    case LayerKind::causal_self_attention:
      return {fmt::format("heads={}", l.heads)};
    case LayerKind::lm_head:
      return {fmt::format("tied={}", l.tied)};
    case LayerKind::relu:
    case LayerKind::gelu:
    case LayerKind::gelu_tanh:
    case LayerKind::flatten:
    case LayerKind::global_avg_pool:
    case LayerKind::concat:
      return {};
  }
  return {};
}
}  // namespace

std::string LayerSpec::to_string() const {
  std::vector<std::string> words = inputs;
  for (std::string& a : canonical_args(*this)) words.push_back(std::move(a));
  std::string s = name.empty() ? "" : name + " = ";
  s += kind == LayerKind::custom ? type : std::string(layer_kind_name(kind));
  if (!words.empty()) s += fmt::format("({})", fmt::join(words, ", "));
  return s;
}

ModelSpec ModelSpec::parse(std::string_view text_or_preset_or_file) {
  const std::string text = trim(text_or_preset_or_file);
  RT_CHECK(!text.empty(), "model spec is empty: give a preset ({}) or a layer list",
           "mlp:784-512-10, cnn");
  if (text.front() == '@') {
    const std::string path = text.substr(1);
    std::ifstream in(path);
    RT_CHECK(in.good(), "model spec file '{}' cannot be read", path);
    std::stringstream buffer;
    buffer << in.rdbuf();
    const std::string body = trim(buffer.str());
    // A file may hold a preset name too.
    if (body.rfind("mlp:", 0) == 0 || body == "cnn" || is_graph_preset(body)) return parse(body);
    return parse_layer_list(body, path + ":");
  }
  if (text.rfind("mlp:", 0) == 0) return parse_mlp(std::string_view(text).substr(4), text);
  if (text == "mlp") fail("'mlp' needs its layer sizes, as in mlp:784-512-512-10");
  if (text == "cnn") return parse_layer_list(kCnnPreset, "cnn preset ");
  if (is_graph_preset(text)) return graph_preset(text, 1000);
  return parse_layer_list(text, "");
}

std::string ModelSpec::to_string() const {
  if (!preset.empty()) return preset;
  std::string s;
  if (!input_shape.empty()) s = fmt::format("input({})", fmt::join(input_shape, ", "));
  for (const LayerSpec& l : layers) s += (s.empty() ? "" : "; ") + l.to_string();
  return s;
}

std::uint64_t ModelSpec::hash() const {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char ch : to_string()) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  return h;
}

bool is_builtin_layer_name(std::string_view name) {
  if (name == "input") return true;
  for (const auto& k : kKindNames)
    if (k.name == name) return true;
  return false;
}

std::string_view cnn_preset_text() {
  return kCnnPreset;
}

std::string_view model_spec_help() {
  return "mlp:784-512-512-10 (input, hidden..., classes; ReLU between), cnn (2 conv + 2 pool + 2 "
         "FC for 1x28x28, 421,642 parameters), resnet18/34/50/101, resnet20/32/56 (CIFAR), "
         "vgg16, vgg16_bn (classes from the data), gpt-nano, gpt2, gpt2-medium (language models "
         "on token data: docs/language-models.md), @file, or a layer graph such as "
         "'conv2d(out=8, kernel=3, padding=1); relu; max_pool2d(kernel=2); flatten; "
         "linear(out=10)' or 'a = conv2d(out=8, kernel=3, padding=1); b = relu; y = add(a, b); "
         "global_avg_pool; linear(out=10)'";
}

}  // namespace ringtrain
