// The model spec parser: presets, @file, and the layer-list language (see
// model_spec.h). Errors name the offending token with its line:column, so a
// typo in a 30-line file is found at once.
#include "ringtrain/model/model_spec.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <fmt/format.h>

#include "model/spec_values.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/nearest_name.h"
#include "ringtrain/model/layer_registry.h"
#include "ringtrain/model/presets.h"

namespace ringtrain {

namespace {

constexpr std::string_view kCnnPreset =
    "input(1, 28, 28); conv2d(out=32, kernel=3, stride=1, padding=1); relu; "
    "max_pool2d(kernel=2, stride=2); conv2d(out=64, kernel=3, stride=1, padding=1); relu; "
    "max_pool2d(kernel=2, stride=2); flatten; linear(out=128); relu; linear(out=10)";

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
  // A run of characters that may form a name or a number; with `product`,
  // also '*' (an argument's value: width*4).
  std::string_view word(bool product = false) {
    const std::size_t start = pos_;
    while (!done()) {
      const char c = peek();
      if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
          c == '+' || (product && c == '*'))
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

// The messages of the helpers in model/spec_values.h.
[[noreturn]] void fail(const std::string& message) {
  spec_fail(message);
}

// Every layer name and spelling a spec may use, for messages.
std::string known_kinds() {
  std::vector<std::string> names = LayerRegistry::global().names();
  for (const std::string& name : LayerRegistry::global().names())
    for (const std::string& alias : LayerRegistry::global().find(name)->aliases)
      names.push_back(alias);
  names.push_back("input");
  return fmt::format("{}", fmt::join(names, ", "));
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
    std::string_view first = c.word(true);
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
      std::string_view v = c.word(true);
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
std::vector<Arg> bind_args(const std::vector<Arg>& args, const std::vector<std::string_view>& keys,
                           std::string_view layer, const std::string& at) {
  const std::vector<std::string_view>& names = keys;
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

// One layer statement's arguments as a LayerSpec (without its name and
// inputs): a built-in layer's arguments checked and typed, a registered type's
// bound to the names it declares. `n_inputs` counts the names it reads.
LayerSpec layer_from_args(std::string_view name, const std::string& lower,
                          const std::vector<Arg>& args, const std::string& at, std::size_t n_inputs,
                          const std::string& blocks_hint) {
  const LayerType* type = LayerRegistry::global().find(lower);
  if (type == nullptr)
    fail(
        fmt::format("unknown layer '{}' at {} (known: {}{}; a layer from a plugin needs "
                    "--plugin)",
                    name, at, known_kinds(), blocks_hint));
  LayerSpec l;
  if (type->parse) {
    // Typed arguments, checked now (the built-in layers).
    std::vector<std::string_view> keys(type->arg_names.begin(), type->arg_names.end());
    std::vector<SpecArg> bound;
    for (Arg& a : bind_args(args, keys, type->name, at)) bound.push_back({a.value, a.where});
    l.kind = type->kind;
    if (l.kind == LayerKind::custom) l.type = type->name;
    type->parse(bound, at, l);
  } else {
    l = parse_registered(*type, args, at);
  }
  if (type->min_inputs >= 2 && n_inputs < type->min_inputs)
    fail(fmt::format("'{}' at {} needs at least {} inputs, as in {}(a, b)", name, at,
                     type->min_inputs == 2 ? std::string("two") : std::to_string(type->min_inputs),
                     type->name));
  if (n_inputs > type->max_inputs) {
    if (type->max_inputs == 1)
      fail(fmt::format("'{}' at {} takes one input, got {}", name, at, n_inputs));
    fail(fmt::format("'{}' at {} takes at most {} inputs, got {}", name, at, type->max_inputs,
                     n_inputs));
  }
  return l;
}

// ---------------------------------------------------------------------------
// The language in two steps: the text is parsed into statements (nodes,
// input(...), repeat, block definitions), then blocks and repeats are expanded
// into the flat node list that Model::build makes, each node remembering where
// in the text it came from.
// ---------------------------------------------------------------------------
struct Statement {
  enum class Kind { node, input, repeat } kind = Kind::node;
  std::string name;        // node: as written, may hold {parameter}; empty: unnamed
  std::string name_where;  // where the statement starts
  std::string layer;       // node: the layer or block it applies, as written
  std::string where;       // where the layer (or the keyword) is
  std::vector<Arg> args;
  // repeat VAR = FROM..TO { body }, or repeat COUNT { body } (then `count` is set)
  std::string var, from, to;
  bool count = false;
  std::vector<Statement> body;
};

struct BlockDef {
  std::string name, where;
  std::vector<Arg> params;  // key: the parameter; value: its default ("" when required)
  std::vector<Statement> body;
};

struct Program {
  std::vector<Statement> top;
  std::map<std::string, BlockDef> blocks;  // by lower-case name
  std::vector<std::string> block_order;    // for messages
  // Where each node name is written, per body ("" for the model's own
  // statements, else the block's name): to tell a forward reference from an
  // unknown name.
  std::map<std::string, std::map<std::string, std::string>> written;
};

std::string lower_case(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// A name as written may hold {parameter} parts: layer{i}.conv1, layer1.{i}.
bool is_name_template(std::string_view s) {
  std::string plain;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '{') {
      const std::size_t close = s.find('}', i);
      if (close == std::string_view::npos) return false;
      plain += '0';
      i = close;
    } else {
      plain += s[i];
    }
  }
  return is_identifier(plain);
}

class Parser {
 public:
  Parser(std::string_view text, std::string origin) : c_(text, std::move(origin)) {}

  // The whole text.
  Program run() {
    prog_.top = statements(true, "", nullptr);
    return std::move(prog_);
  }

 private:
  // Statements up to the end, or up to the '}' that closes `open` (where the
  // '{' was). Block definitions only at the top (`top` set).
  std::vector<Statement> statements(bool top, const std::string& body_of, const char* open) {
    std::vector<Statement> out;
    Program& prog = prog_;
    while (true) {
      c_.skip_blank(true);
      while (c_.peek() == ';') {
        c_.advance();
        c_.skip_blank(true);
      }
      if (c_.done()) {
        if (open != nullptr) fail(fmt::format("missing '}}' for the '{{' at {}", open));
        break;
      }
      if (c_.peek() == '}') {
        if (open == nullptr)
          fail(fmt::format("unexpected '}}' at {}: no block is open", c_.where()));
        c_.advance();
        return out;
      }
      const std::string at = c_.where();
      const std::string first = name_template();
      if (first.empty())
        fail(fmt::format("unexpected '{}' at {}: expected a layer name", c_.token_here(), at));
      c_.skip_blank(false);
      if (c_.peek() != '=' && first == "block") {
        if (!top)
          fail(
              fmt::format("block definition at {} inside a block or repeat: define blocks at the "
                          "top level",
                          at));
        block(prog, at);
        continue;  // a definition ends with its '}'
      }
      if (c_.peek() != '=' && first == "repeat") {
        out.push_back(repeat(at, body_of));
        continue;  // ends with its '}'
      }
      Statement s;
      s.name_where = at;
      if (c_.peek() == '=') {
        // "name = layer(...)": a named node
        s.name = first;
        if (!is_name_template(s.name))
          fail(
              fmt::format("bad node name '{}' at {}: use letters, digits, '_' and '.', starting "
                          "with a letter ({{p}} puts in a parameter)",
                          s.name, at));
        // A node may share a layer type's name (torchvision's `fc`): a node is
        // only ever read as an argument, a type only ever written as a statement.
        if (s.name == "input")
          fail(fmt::format("node name 'input' at {} is taken: it is the model's input", at));
        c_.advance();
        c_.skip_blank(false);
        s.where = c_.where();
        s.layer = std::string(c_.word());
        if (s.layer.empty())
          fail(fmt::format("unexpected '{}' at {}: expected a layer after '{} ='", c_.token_here(),
                           s.where, s.name));
        c_.skip_blank(false);
        prog.written[body_of].emplace(s.name, at);
      } else {
        if (first.find('{') != std::string::npos)
          fail(fmt::format("unexpected '{}' at {}: a {{parameter}} belongs in a node's name", first,
                           at));
        s.where = at;
        s.layer = first;
      }
      if (c_.peek() == '(') s.args = parse_args(c_, s.layer);
      if (lower_case(s.layer) == "input") {
        if (!s.name.empty()) fail(fmt::format("'input' at {} cannot be named", s.where));
        s.kind = Statement::Kind::input;
      }
      const std::string layer = s.layer;
      out.push_back(std::move(s));
      end_of_statement(layer);
    }
    return out;
  }

  void end_of_statement(const std::string& after) {
    c_.skip_blank(false);
    if (c_.done() || c_.peek() == '}') return;
    if (c_.peek() == ';' || c_.peek() == '\n') {
      c_.advance();
      return;
    }
    fail(fmt::format("unexpected '{}' at {} after '{}': separate layers with ';' or a new line",
                     c_.token_here(), c_.where(), after));
  }

  // A name, with {parameter} parts allowed right after a letter, digit or '.'.
  std::string name_template() {
    std::string s(c_.word());
    while (!s.empty() && c_.peek() == '{') {
      const std::string at = c_.where();
      c_.advance();
      const std::string_view p = c_.word();
      if (p.empty() || c_.peek() != '}')
        fail(
            fmt::format("bad name '{}{{' at {}: '{{' holds a parameter's name and '}}', as in "
                        "layer{{i}}",
                        s, at));
      c_.advance();
      s += "{" + std::string(p) + "}";
      s += c_.word();
    }
    return s;
  }

  void expect_open_brace(const std::string& what) {
    c_.skip_blank(true);
    if (c_.peek() != '{')
      fail(fmt::format("expected '{{' at {} to open {}, found '{}'", c_.where(), what,
                       c_.token_here()));
  }

  // block NAME(p, q=default, ...) { statements }
  void block(Program& prog, const std::string& at) {
    BlockDef b;
    b.where = at;
    b.name = lower_case(c_.word());
    if (b.name.empty() || !is_identifier(b.name) || b.name.find('.') != std::string::npos)
      fail(fmt::format("expected a block name after 'block' at {}, found '{}'", at,
                       c_.token_here()));
    if (is_builtin_layer_name(b.name) || LayerRegistry::global().find(b.name) != nullptr)
      fail(fmt::format("block '{}' at {} has the name of a layer: choose another", b.name, at));
    if (prog.blocks.count(b.name) != 0)
      fail(fmt::format("block '{}' defined twice (at {} and again at {})", b.name,
                       prog.blocks.at(b.name).where, at));
    c_.skip_blank(false);
    if (c_.peek() != '(')
      fail(
          fmt::format("block '{}' at {} needs its parameters in (), as in block {}(width, "
                      "stride=1): found '{}'",
                      b.name, at, b.name, c_.token_here()));
    for (Arg& a : parse_args(c_, b.name)) {
      Arg p;
      p.where = a.where;
      p.key = a.key.empty() ? a.value : a.key;
      p.value = a.key.empty() ? "" : a.value;
      if (!is_identifier(p.key) || p.key.find('.') != std::string::npos || p.key == "input")
        fail(
            fmt::format("bad parameter '{}' of block '{}' at {}: a parameter is a name other "
                        "than 'input'",
                        p.key, b.name, a.where));
      for (const Arg& q : b.params)
        if (q.key == p.key)
          fail(fmt::format("parameter '{}' of block '{}' given twice at {}", p.key, b.name,
                           a.where));
      b.params.push_back(std::move(p));
    }
    expect_open_brace(fmt::format("the body of block '{}'", b.name));
    const std::string open = c_.where();
    c_.advance();
    b.body = statements(false, b.name, open.c_str());
    if (b.body.empty()) fail(fmt::format("block '{}' at {} has no layers", b.name, at));
    prog.block_order.push_back(b.name);
    const std::string name = b.name;
    prog.blocks.emplace(name, std::move(b));
    end_of_statement("}");
  }

  // repeat i = 1..3 { statements }  or  repeat 3 { statements } (i from 0)
  Statement repeat(const std::string& at, const std::string& body_of) {
    Statement s;
    s.kind = Statement::Kind::repeat;
    s.where = at;
    s.name_where = at;
    const std::string first(c_.word());
    c_.skip_blank(false);
    if (c_.peek() == '=') {
      s.var = first;
      if (!is_identifier(s.var) || s.var.find('.') != std::string::npos)
        fail(fmt::format("bad repeat variable '{}' at {}", s.var, at));
      c_.advance();
      c_.skip_blank(false);
      const std::string range_at = c_.where();
      const std::string range(c_.word());
      const std::size_t dots = range.find("..");
      if (dots == std::string::npos || dots == 0 || dots + 2 >= range.size())
        fail(fmt::format("bad range '{}' at {}: write repeat {} = FIRST..LAST", range, range_at,
                         s.var));
      s.from = range.substr(0, dots);
      s.to = range.substr(dots + 2);
    } else {
      if (first.empty())
        fail(
            fmt::format("expected a count or 'VAR = FIRST..LAST' after 'repeat' at {}, found "
                        "'{}'",
                        at, c_.token_here()));
      s.count = true;
      s.from = "0";
      s.to = first;
    }
    expect_open_brace("the body of repeat");
    const std::string open = c_.where();
    c_.advance();
    s.body = statements(false, body_of, open.c_str());
    end_of_statement("}");
    return s;
  }

  Cursor c_;
  Program prog_;
};

// A node of the expanded graph as a scope sees it: its index in the node list
// (-1: the model's input) and its name there (empty: unnamed).
struct NodeRef {
  int index = -1;
  std::string name = "input";
};

// Names visible to the statements of the model or of one block call.
struct Scope {
  std::string prefix;                      // of the nodes' names: "layer1.0."
  std::string body_of;                     // "" or the block's name
  std::map<std::string, std::string> env;  // parameters and repeat variables
  std::map<std::string, NodeRef> names;    // local name -> node
  std::vector<std::string> order;          // local names, for messages
  NodeRef input, last;                     // what 'input' and the next unnamed read mean
  bool top = true;
  std::string context;  // ", in block 'b' called at 3:1": for messages
};

class Expander {
 public:
  explicit Expander(const Program& prog) : prog_(prog) {}

  ModelSpec run(const std::string& origin) {
    Scope top;
    statements(prog_.top, top);
    if (spec_.layers.empty())
      fail(fmt::format("{}no layers given", origin.empty() ? "" : origin + " "));
    spec_.origins = std::move(origins_);
    return std::move(spec_);
  }

 private:
  void statements(const std::vector<Statement>& list, Scope& s) {
    for (const Statement& st : list) {
      switch (st.kind) {
        case Statement::Kind::input:
          input(st, s);
          break;
        case Statement::Kind::repeat:
          repeat(st, s);
          break;
        case Statement::Kind::node:
          node(st, s);
          break;
      }
    }
  }

  void input(const Statement& st, const Scope& s) {
    const std::string& at = st.where;
    if (!s.top)
      fail(fmt::format("'input' at {}{}: the input shape belongs to the model, not to a block", at,
                       s.context));
    if (input_seen_) fail(fmt::format("'input' given twice (again at {})", at));
    if (!spec_.layers.empty())
      fail(fmt::format("'input' at {} must come before the first layer", at));
    if (st.args.empty() || st.args.size() > 4)
      fail(fmt::format("'input' at {} takes 1 to 4 dimensions, got {}", at, st.args.size()));
    for (const Arg& a : st.args) {
      if (!a.key.empty())
        fail(fmt::format("'input' takes no named arguments ('{}' at {})", a.key, a.where));
      spec_.input_shape.push_back(parse_count(a.value, "an input dimension", a.where, false));
    }
    input_seen_ = true;
  }

  // A whole number, literal or a parameter's value.
  std::size_t whole(const std::string& text, std::string_view what, const std::string& where,
                    const Scope& s) {
    const auto it = s.env.find(text);
    return parse_count(it == s.env.end() ? text : it->second, what, where + s.context, true);
  }

  void repeat(const Statement& st, Scope& s) {
    const std::size_t from = whole(st.from, "the first repeat index", st.where, s);
    const std::size_t to =
        whole(st.to, st.count ? "a repeat count" : "the last repeat index", st.where, s);
    if (!st.var.empty() && s.env.count(st.var) != 0)
      fail(fmt::format("repeat variable '{}' at {}{} hides a parameter of that name", st.var,
                       st.where, s.context));
    const std::size_t end = st.count ? to : to + 1;
    for (std::size_t i = from; i < end; ++i) {
      if (!st.var.empty()) s.env[st.var] = std::to_string(i);
      statements(st.body, s);
    }
    if (!st.var.empty()) s.env.erase(st.var);
  }

  // A name as written, its {parameter} parts replaced.
  std::string expand_name(const std::string& written, const std::string& where, const Scope& s) {
    std::string out;
    for (std::size_t i = 0; i < written.size(); ++i) {
      if (written[i] != '{') {
        out += written[i];
        continue;
      }
      const std::size_t close = written.find('}', i);
      const std::string p = written.substr(i + 1, close - i - 1);
      const auto it = s.env.find(p);
      if (it == s.env.end())
        fail(fmt::format("unknown parameter '{}' in the name '{}' at {}{}", p, written, where,
                         s.context));
      out += it->second;
      i = close;
    }
    if (!is_identifier(out))
      fail(fmt::format("bad node name '{}' (from '{}') at {}{}", out, written, where, s.context));
    return out;
  }

  // An argument's value with parameters put in; a*b*... multiplies whole numbers.
  std::string expand_value(const std::string& v, const std::string& where, const Scope& s) {
    const auto it = s.env.find(v);
    if (it != s.env.end()) return it->second;
    if (v.find('*') == std::string::npos) return v;
    std::size_t product = 1, start = 0;
    while (true) {
      const std::size_t star = v.find('*', start);
      const std::string factor = v.substr(start, star == std::string::npos ? star : star - start);
      const auto f = s.env.find(factor);
      product *= parse_count(f == s.env.end() ? factor : f->second,
                             fmt::format("a factor of '{}'", v), where + s.context, true);
      if (star == std::string::npos) break;
      start = star + 1;
    }
    return std::to_string(product);
  }

  std::string defined_so_far(const Scope& s) const {
    return s.order.empty() ? std::string()
                           : fmt::format(" (defined so far: {})", fmt::join(s.order, ", "));
  }

  // The node that `name`, read by the node `self` (a local name), stands for.
  NodeRef resolve(const std::string& name, const std::string& reader, const std::string& self,
                  const std::string& where, const Scope& s) {
    if (name == "input") return s.input;
    const auto it = s.names.find(name);
    if (it != s.names.end()) return it->second;
    if (!self.empty() && name == self)
      fail(fmt::format("node '{}' reads itself at {}{}: a graph has no cycles", name, where,
                       s.context));
    const auto body = prog_.written.find(s.body_of);
    if (body != prog_.written.end() && body->second.count(name) != 0)
      fail(
          fmt::format("'{}' at {}{} reads '{}', which is defined later (at {}): a node reads "
                      "only earlier nodes, so that the graph has no cycle",
                      self.empty() ? reader : self, where, s.context, name, body->second.at(name)));
    fail(fmt::format("unknown input '{}' of '{}' at {}{}: name an earlier node or 'input'{}", name,
                     reader, where, s.context, defined_so_far(s)));
  }

  // How a node refers to `r` in the node list.
  std::string name_of(const NodeRef& r, const std::string& where, const Scope& s) {
    if (r.index < 0) return "input";
    if (r.name.empty())
      fail(
          fmt::format("the node read at {}{} has no name, and it is not the node just before: "
                      "name it (x = ...) or pass a named node",
                      where, s.context));
    return r.name;
  }

  void define(const std::string& local, const NodeRef& r, const std::string& where, Scope& s) {
    if (s.names.count(local) != 0)
      fail(fmt::format("node '{}' defined twice (again at {}{})", local, where, s.context));
    s.names[local] = r;
    s.order.push_back(local);
  }

  void claim_global(const std::string& name, const std::string& where, const Scope& s) {
    if (!global_names_.insert(name).second)
      fail(fmt::format("node '{}' defined twice (again at {}{})", name, where, s.context));
  }

  void node(const Statement& st, Scope& s) {
    const std::string local = st.name.empty() ? "" : expand_name(st.name, st.name_where, s);
    std::vector<Arg> args = st.args;
    for (Arg& a : args) a.value = expand_value(a.value, a.where, s);
    // Leading positional arguments that are names are the node's inputs.
    std::vector<Arg> inputs;
    std::size_t taken = 0;
    for (; taken < args.size(); ++taken) {
      const Arg& a = args[taken];
      if (!a.key.empty() || !is_identifier(a.value) || a.value == "true" || a.value == "false")
        break;
      inputs.push_back(a);
    }
    args.erase(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(taken));
    const std::string lower = lower_case(st.layer);
    if (prog_.blocks.count(lower) != 0) {
      call(st, prog_.blocks.at(lower), local, inputs, args, s);
      return;
    }
    LayerSpec l =
        layer_from_args(st.layer, lower, args, st.where + s.context, inputs.size(), blocks_hint());
    const int index = static_cast<int>(spec_.layers.size());
    std::vector<NodeRef> reads;
    for (const Arg& a : inputs) reads.push_back(resolve(a.value, st.layer, local, a.where, s));
    if (reads.empty()) {
      // The previous statement's node: in the node list just before, or named.
      if (s.last.index != index - 1) l.inputs.push_back(name_of(s.last, st.where, s));
    } else if (!s.top && reads.size() == 1 && reads[0].index == index - 1) {
      // Inside a block the node just before is read without naming it, as
      // GraphBuilder writes it, so that a block expands to the builder's graph.
    } else {
      for (std::size_t i = 0; i < reads.size(); ++i)
        l.inputs.push_back(name_of(reads[i], inputs[i].where, s));
    }
    if (!local.empty()) {
      l.name = s.prefix + local;
      claim_global(l.name, st.name_where, s);
    }
    const NodeRef me{index, l.name};
    if (!local.empty()) define(local, me, st.name_where, s);
    spec_.layers.push_back(std::move(l));
    origins_.push_back(st.where + s.context);
    s.last = me;
  }

  void call(const Statement& st, const BlockDef& b, const std::string& local,
            const std::vector<Arg>& inputs, const std::vector<Arg>& args, Scope& s) {
    const std::string at = st.where + s.context;
    for (const std::string& open : stack_)
      if (open == b.name)
        fail(
            fmt::format("block '{}' calls itself at {} (through {} -> {}): blocks may not "
                        "recurse",
                        b.name, at, fmt::join(stack_, " -> "), b.name));
    if (inputs.size() > 1)
      fail(fmt::format("block '{}' at {} takes one input, got {}", b.name, at, inputs.size()));
    Scope child;
    child.top = false;
    child.body_of = b.name;
    child.input =
        inputs.empty() ? s.last : resolve(inputs[0].value, b.name, local, inputs[0].where, s);
    child.last = child.input;
    // Parameters: positional in the order declared, then by name.
    std::vector<std::string> keys;
    for (const Arg& p : b.params) keys.push_back(p.key);
    const std::string takes =
        keys.empty() ? std::string("none") : fmt::format("{}", fmt::join(keys, ", "));
    std::size_t positional = 0;
    for (const Arg& a : args) {
      std::string key = a.key;
      if (key.empty()) {
        if (positional >= keys.size())
          fail(fmt::format("too many arguments to block '{}' at {}{}: '{}' (it takes {})", b.name,
                           a.where, s.context, a.value, takes));
        key = keys[positional++];
      } else if (std::find(keys.begin(), keys.end(), key) == keys.end()) {
        fail(fmt::format("unknown argument '{}' to block '{}' at {}{} (it takes {})", key, b.name,
                         a.where, s.context, takes));
      }
      if (!child.env.emplace(key, a.value).second)
        fail(fmt::format("argument '{}' of block '{}' given twice at {}{}", key, b.name, a.where,
                         s.context));
    }
    for (const Arg& p : b.params)
      if (child.env.count(p.key) == 0) {
        if (p.value.empty())
          fail(fmt::format("block '{}' called at {} needs '{}' (it takes {})", b.name, at, p.key,
                           takes));
        child.env[p.key] = p.value;
      }
    const std::string call_name =
        local.empty() ? fmt::format("{}{}", b.name, ++unnamed_calls_[b.name]) : local;
    child.prefix = s.prefix + call_name + ".";
    child.context = fmt::format(", in block '{}' called at {}", b.name, st.where) + s.context;
    const std::size_t first = spec_.layers.size();
    stack_.push_back(b.name);
    statements(b.body, child);
    stack_.pop_back();
    if (spec_.layers.size() == first)
      fail(fmt::format("block '{}' called at {} made no layers", b.name, at));
    NodeRef out = child.last;
    if (!local.empty()) {
      // The call's name reads the block's last node (which takes that name
      // when it has none of its own).
      if (out.name.empty()) {
        out.name = s.prefix + local;
        claim_global(out.name, st.name_where, s);
        spec_.layers[static_cast<std::size_t>(out.index)].name = out.name;
      }
      define(local, out, st.name_where, s);
      for (const auto& [n, r] : child.names) s.names[local + "." + n] = r;
    }
    s.last = out;
  }

  std::string blocks_hint() const {
    return prog_.block_order.empty()
               ? std::string()
               : fmt::format("; blocks: {}", fmt::join(prog_.block_order, ", "));
  }

  const Program& prog_;
  ModelSpec spec_;
  std::vector<std::string> origins_;
  std::vector<std::string> stack_;  // the blocks being expanded, outermost first
  std::map<std::string, std::size_t> unnamed_calls_;
  std::set<std::string> global_names_;
  bool input_seen_ = false;
};

ModelSpec parse_layer_list(std::string_view text, const std::string& origin) {
  const Program prog = Parser(text, origin).run();
  return Expander(prog).run(origin);
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

// A single word with no layer syntax ("resnet51", "myres.txt"): what a user
// types for a preset or a file, never a layer list worth building.
bool looks_like_a_name(std::string_view text) {
  if (text.empty()) return false;
  for (const char c : text)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.' ||
          c == '/' || c == ':' || c == '='))
      return false;
  const std::string lower = lower_case(text);
  return LayerRegistry::global().find(lower) == nullptr && lower != "input";
}

// "'resnet51' is not a known preset (did you mean 'resnet50'?) ...", or, for
// a word that names a file, how to read a model from it.
[[noreturn]] void fail_unknown_preset(const std::string& text) {
  std::vector<std::string> names;
  for (const auto& [name, _] : model_preset_list()) names.push_back(name);
  const bool file_like = text.find('/') != std::string::npos ||
                         text.find('.') != std::string::npos || std::ifstream(text).good();
  if (file_like)
    fail(
        fmt::format("--model '{}' is not a known preset; to read a model from the file {}, write "
                    "--model @{} (presets: {}; 'ringtrain model list' describes them)",
                    text, text, text, fmt::join(names, ", ")));
  // Nor a layer: it may be a plugin's that is not loaded.
  std::vector<std::string> candidates = names;
  for (const std::string& layer : LayerRegistry::global().names()) candidates.push_back(layer);
  fail(
      fmt::format("--model '{}' is not a known preset{} (presets: {}; 'ringtrain model list' "
                  "describes them), nor a known layer (known: {}; a layer from a plugin needs "
                  "--plugin)",
                  text, did_you_mean(text, candidates), fmt::join(names, ", "), known_kinds()));
}

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

}  // namespace

std::string_view layer_kind_name(LayerKind kind) {
  if (kind == LayerKind::custom) return "custom";
  const LayerType* type = LayerRegistry::global().find(kind);
  return type == nullptr ? std::string_view("?") : std::string_view(type->name);
}

namespace {
// The layer's own arguments, canonical, without inputs or name.
std::vector<std::string> canonical_args(const LayerSpec& l) {
  const LayerType* type = l.kind == LayerKind::custom ? LayerRegistry::global().find(l.type)
                                                      : LayerRegistry::global().find(l.kind);
  if (type != nullptr && type->canonical) return type->canonical(l);
  std::vector<std::string> a;
  for (const auto& [k, v] : l.args) a.push_back(fmt::format("{}={}", k, v));
  return a;
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
    ModelSpec spec = parse_layer_list(body, path + ":");
    spec.source = "@" + path;
    return spec;
  }
  if (text.rfind("mlp:", 0) == 0) return parse_mlp(std::string_view(text).substr(4), text);
  if (text == "mlp") fail("'mlp' needs its layer sizes, as in mlp:784-512-512-10");
  if (text == "cnn") return parse_layer_list(kCnnPreset, "cnn preset ");
  if (is_graph_preset(text)) return graph_preset(text, 1000);
  if (looks_like_a_name(text)) fail_unknown_preset(text);
  return parse_layer_list(text, "");
}

std::string ModelSpec::to_string() const {
  if (!preset.empty()) return preset;
  std::string s;
  if (!input_shape.empty()) s = fmt::format("input({})", fmt::join(input_shape, ", "));
  for (const LayerSpec& l : layers) s += (s.empty() ? "" : "; ") + l.to_string();
  return s;
}

std::string ModelSpec::describe() const {
  if (!preset.empty()) return preset;
  if (!source.empty()) return source;
  const std::string text = to_string();
  constexpr std::size_t kLongest = 60;
  return text.size() <= kLongest ? text : text.substr(0, kLongest) + "...";
}

bool ModelSpec::operator==(const ModelSpec& o) const {
  return input_shape == o.input_shape && layers == o.layers && preset == o.preset;
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
  if (name == "input" || name == "block" || name == "repeat") return true;
  const LayerType* type = LayerRegistry::global().find(name);
  return type != nullptr && type->origin == "built-in";
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
         "global_avg_pool; linear(out=10)', with blocks and repeat (block b(w) { ... }; "
         "repeat i = 1..3 { s{i} = b(16) }: docs/models.md)";
}

}  // namespace ringtrain
