// Parsing and applying the augmentation language (sample_transform.h). A
// sample travels as planes (C x H x W bytes, as stored): crops are views, and
// resize, pad and flip write a new buffer. The last step writes floats, or
// the bytes with their per-channel widening for the device to apply.
#include "ringtrain/data/sample_transform.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <optional>

#include "data/image_resample.h"
#include "data/random.h"
#include "kernels/image_resample.cuh"
#include "kernels/widen_bytes.cuh"
#include "ringtrain/core/check.h"
#include "ringtrain/core/nearest_name.h"

namespace ringtrain {

struct SampleTransform::Step {
  enum Kind {
    random_resized_crop,
    random_crop,
    hflip,
    vflip,
    rotation,
    color_jitter,
    grayscale,
    resize,
    center_crop,
    normalize
  } kind;
  int h = 0, w = 0;                               // output size; resize with w == 0: short side h
  double lo = 0.08, hi = 1.0;                     // random_resized_crop: scale range
  double ratio_lo = 3.0 / 4, ratio_hi = 4.0 / 3;  // and aspect ratio range
  int padding = 0;                                // random_crop
  double p = 0.5;                                 // hflip, vflip, grayscale (default 1)
  double degrees = 0;                             // rotation: uniform in [-degrees, degrees]
  double brightness = 0, contrast = 0, saturation = 0;  // color_jitter: factor 1 +- this
  std::vector<float> mean, std;                         // normalize
};

namespace {

using Step = SampleTransform::Step;

// --- parsing ---------------------------------------------------------------

// A value: a number (3/4 allowed) or a parenthesised list of numbers.
struct Value {
  std::vector<double> v;
  bool list = false;
};

class Parser {
 public:
  Parser(const std::string& text, const std::string& flag) : s_(text), flag_(flag) {}

  std::vector<std::pair<std::string, std::vector<std::pair<std::string, Value>>>> items() {
    std::vector<std::pair<std::string, std::vector<std::pair<std::string, Value>>>> out;
    skip();
    while (pos_ < s_.size()) {
      std::string name = word();
      fail_if(name.empty(), "expected a step name");
      std::vector<std::pair<std::string, Value>> args;
      skip();
      if (peek() == '(') {
        ++pos_;
        skip();
        while (peek() != ')') {
          std::string key;
          const std::size_t at = pos_;
          if (std::isalpha(static_cast<unsigned char>(peek()))) {
            key = word();
            skip();
            if (peek() != '=') {  // not a key after all
              pos_ = at;
              key.clear();
            } else {
              ++pos_;
            }
          }
          args.emplace_back(key, value());
          skip();
          if (peek() == ',') {
            ++pos_;
            skip();
          } else {
            fail_if(peek() != ')', "expected ',' or ')'");
          }
        }
        ++pos_;
      }
      out.emplace_back(name, std::move(args));
      skip();
      if (pos_ < s_.size()) {
        fail_if(peek() != ',' && peek() != '+', "expected ',' or '+' between steps");
        ++pos_;
        skip();
      }
    }
    return out;
  }

  [[noreturn]] void fail(const std::string& why) const {
    RT_CHECK(false, "{} '{}': {} at character {}", flag_, s_, why, pos_ + 1);
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void fail_if(bool bad, const std::string& why) const {
    if (bad) fail(why);
  }
  std::string word() {
    const std::size_t b = pos_;
    while (pos_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
      ++pos_;
    return s_.substr(b, pos_ - b);
  }
  double number() {
    skip();
    const char* start = s_.c_str() + pos_;
    char* end = nullptr;
    double v = std::strtod(start, &end);
    fail_if(end == start, "expected a number");
    pos_ += static_cast<std::size_t>(end - start);
    skip();
    if (peek() == '/') {
      ++pos_;
      skip();
      const char* d0 = s_.c_str() + pos_;
      const double d = std::strtod(d0, &end);
      fail_if(end == d0 || d == 0.0, "expected a non-zero denominator");
      pos_ += static_cast<std::size_t>(end - d0);
      v /= d;
    }
    return v;
  }
  Value value() {
    Value val;
    skip();
    if (peek() == '(') {
      ++pos_;
      val.list = true;
      for (;;) {
        val.v.push_back(number());
        skip();
        if (peek() == ',') {
          ++pos_;
          continue;
        }
        fail_if(peek() != ')', "expected ',' or ')' in a list");
        ++pos_;
        break;
      }
    } else {
      val.v.push_back(number());
    }
    return val;
  }

  const std::string& s_;
  const std::string& flag_;
  std::size_t pos_ = 0;
};

const std::vector<float> kImagenetMean = {0.485f, 0.456f, 0.406f};
const std::vector<float> kImagenetStd = {0.229f, 0.224f, 0.225f};

std::string preset(const std::string& name, bool eval) {
  if (name == "imagenet")
    return eval ? "resize(256), center_crop(224), normalize(mean=(0.485,0.456,0.406), "
                  "std=(0.229,0.224,0.225))"
                : "random_resized_crop(224), hflip, normalize(mean=(0.485,0.456,0.406), "
                  "std=(0.229,0.224,0.225))";
  if (name == "cifar") return eval ? "" : "random_crop(32, padding=4), hflip";
  return "";
}

bool is_preset(const std::string& name) {
  return name == "imagenet" || name == "cifar";
}

bool is_batch_step(const std::string& name) {
  return name == "mixup" || name == "cutmix";
}

// mixup(alpha=A) / cutmix(alpha=A), A > 0 (torchvision's default 1), into `batch`.
void parse_batch_step(const std::string& name,
                      const std::vector<std::pair<std::string, Value>>& args,
                      const std::string& spec, const std::string& flag, BatchMixSpec& batch) {
  double alpha = 1.0;
  for (std::size_t k = 0; k < args.size(); ++k) {
    const auto& [key, v] = args[k];
    RT_CHECK(args.size() == 1 && (key.empty() || key == "alpha") && v.v.size() == 1 && !v.list &&
                 std::isfinite(v.v[0]) && v.v[0] > 0,
             "{} '{}': {} takes (alpha=A) with A > 0 (lam ~ Beta(A, A)); default alpha=1", flag,
             spec, name);
    alpha = v.v[0];
  }
  double& slot = name == "mixup" ? batch.mixup_alpha : batch.cutmix_alpha;
  RT_CHECK(slot == 0, "{} '{}': {} is given twice", flag, spec, name);
  slot = alpha;
}

// The per-sample steps of `spec`; its batch steps (mixup, cutmix) go to
// `batch`, or are an Error where there is none (evaluation, presets).
std::vector<Step> parse_steps(const std::string& spec, const std::string& flag,
                              BatchMixSpec* batch = nullptr) {
  Parser parser(spec, flag);
  std::vector<Step> steps;
  bool batch_seen = false;
  for (auto& [name, args] : parser.items()) {
    if (is_batch_step(name)) {
      RT_CHECK(batch != nullptr,
               "{} '{}': {} mixes the samples of a training batch: it belongs in --augment, not "
               "{}",
               flag, spec, name, flag);
      parse_batch_step(name, args, spec, flag, *batch);
      batch_seen = true;
      continue;
    }
    RT_CHECK(!batch_seen,
             "{} '{}': {} comes after a batch step: mixup and cutmix apply to the whole batch, "
             "after every per-sample step, so they come last",
             flag, spec, name);
    if (name == "none") {
      RT_CHECK(args.empty(), "{} '{}': none takes no arguments", flag, spec);
      continue;
    }
    if (is_preset(name)) {
      RT_CHECK(args.empty(), "{} '{}': the preset {} takes no arguments", flag, spec, name);
      for (Step& s : parse_steps(preset(name, false), flag)) steps.push_back(s);
      continue;
    }
    Step s{};
    std::size_t positional = 0;
    auto size_of = [&](const Value& v, int& h, int& w, bool allow_short) {
      RT_CHECK(v.v.size() == 1 || v.v.size() == 2, "{} '{}': {}: a size is N or (H,W)", flag, spec,
               name);
      for (double d : v.v)
        RT_CHECK(d >= 1 && d <= 65535 && d == std::floor(d),
                 "{} '{}': {}: sizes are positive integers", flag, spec, name);
      h = static_cast<int>(v.v[0]);
      w = v.v.size() == 2 ? static_cast<int>(v.v[1]) : (allow_short ? 0 : h);
    };
    auto pair_of = [&](const Value& v, double& a, double& b, const char* what) {
      RT_CHECK(v.v.size() == 2 && v.v[0] <= v.v[1] && v.v[0] > 0, "{} '{}': {}: {} is (low,high)",
               flag, spec, name, what);
      a = v.v[0];
      b = v.v[1];
    };
    bool have_size = false;
    if (name == "random_resized_crop") {
      s.kind = Step::random_resized_crop;
      for (auto& [key, v] : args) {
        if (key.empty() && positional++ == 0) {
          size_of(v, s.h, s.w, false);
          have_size = true;
        } else if (key == "scale") {
          pair_of(v, s.lo, s.hi, "scale");
          RT_CHECK(s.hi <= 1.0, "{} '{}': random_resized_crop: scale is a fraction of the area",
                   flag, spec);
        } else if (key == "ratio") {
          pair_of(v, s.ratio_lo, s.ratio_hi, "ratio");
        } else {
          parser.fail("random_resized_crop takes (size, scale=(a,b), ratio=(a,b))");
        }
      }
    } else if (name == "random_crop") {
      s.kind = Step::random_crop;
      for (auto& [key, v] : args) {
        if (key.empty() && positional++ == 0) {
          size_of(v, s.h, s.w, false);
          have_size = true;
        } else if (key == "padding" || (key.empty() && positional == 2)) {
          RT_CHECK(v.v.size() == 1 && v.v[0] >= 0 && v.v[0] <= 4096 && v.v[0] == std::floor(v.v[0]),
                   "{} '{}': random_crop: padding is an integer >= 0", flag, spec);
          s.padding = static_cast<int>(v.v[0]);
        } else {
          parser.fail("random_crop takes (size, padding=P)");
        }
      }
    } else if (name == "hflip") {
      s.kind = Step::hflip;
      for (auto& [key, v] : args) {
        RT_CHECK((key.empty() || key == "p") && v.v.size() == 1 && v.v[0] >= 0 && v.v[0] <= 1,
                 "{} '{}': hflip takes (p) with 0 <= p <= 1", flag, spec);
        s.p = v.v[0];
      }
      have_size = true;
    } else if (name == "vflip" || name == "grayscale") {
      // grayscale is torchvision's Grayscale (p=1) and RandomGrayscale (p<1).
      s.kind = name == "vflip" ? Step::vflip : Step::grayscale;
      s.p = name == "vflip" ? 0.5 : 1.0;
      for (auto& [key, v] : args) {
        RT_CHECK((key.empty() || key == "p") && v.v.size() == 1 && v.v[0] >= 0 && v.v[0] <= 1,
                 "{} '{}': {} takes (p) with 0 <= p <= 1", flag, spec, name);
        s.p = v.v[0];
      }
      have_size = true;
    } else if (name == "rotation") {
      s.kind = Step::rotation;
      RT_CHECK(args.size() == 1 && (args[0].first.empty() || args[0].first == "degrees") &&
                   args[0].second.v.size() == 1 && args[0].second.v[0] >= 0 &&
                   args[0].second.v[0] <= 180,
               "{} '{}': rotation takes (degrees) in [0, 180]: an angle uniform in [-degrees, "
               "degrees]",
               flag, spec);
      s.degrees = args[0].second.v[0];
      have_size = true;
    } else if (name == "color_jitter") {
      s.kind = Step::color_jitter;
      const char* names[] = {"brightness", "contrast", "saturation"};
      double* fields[] = {&s.brightness, &s.contrast, &s.saturation};
      for (auto& [key, v] : args) {
        std::size_t slot = 3;
        if (key.empty()) slot = positional++;
        for (std::size_t k = 0; k < 3; ++k)
          if (key == names[k]) slot = k;
        RT_CHECK(slot < 3 && v.v.size() == 1 && v.v[0] >= 0 && v.v[0] <= 1,
                 "{} '{}': color_jitter takes (brightness=B, contrast=C, saturation=S), each in "
                 "[0, 1] (the factor is drawn from [1-x, 1+x])",
                 flag, spec);
        *fields[slot] = v.v[0];
      }
      have_size = true;
    } else if (name == "resize" || name == "center_crop") {
      s.kind = name == "resize" ? Step::resize : Step::center_crop;
      RT_CHECK(args.size() == 1 && args[0].first.empty(), "{} '{}': {} takes one size", flag, spec,
               name);
      size_of(args[0].second, s.h, s.w, name == "resize");
      have_size = true;
    } else if (name == "normalize") {
      s.kind = Step::normalize;
      for (auto& [key, v] : args) {
        const bool mean = key == "mean" || (key.empty() && positional == 0);
        const bool sd = key == "std" || (key.empty() && positional == 1);
        if (key.empty()) ++positional;
        RT_CHECK(mean || sd, "{} '{}': normalize takes (mean=(...), std=(...))", flag, spec);
        std::vector<float>& dst = mean ? s.mean : s.std;
        for (double d : v.v) dst.push_back(static_cast<float>(d));
      }
      RT_CHECK(!s.mean.empty() && s.mean.size() == s.std.size(),
               "{} '{}': normalize needs mean and std with one value per channel", flag, spec);
      for (float d : s.std) RT_CHECK(d > 0, "{} '{}': normalize: std must be > 0", flag, spec);
      have_size = true;
    } else {
      parser.fail(
          "unknown step '" + name + "'" +
          did_you_mean(name, {"random_resized_crop", "random_crop", "hflip", "vflip", "rotation",
                              "color_jitter", "grayscale", "resize", "center_crop", "normalize",
                              "imagenet", "cifar", "none", "mixup", "cutmix"}) +
          " (known: random_resized_crop, random_crop, hflip, vflip, rotation, "
          "color_jitter, grayscale, resize, center_crop, normalize, presets imagenet and "
          "cifar, none; batch steps mixup and cutmix)");
    }
    RT_CHECK(have_size, "{} '{}': {} needs a size", flag, spec, name);
    steps.push_back(s);
  }
  for (std::size_t i = 0; i + 1 < steps.size(); ++i)
    RT_CHECK(steps[i].kind != Step::normalize, "{} '{}': normalize must be the last step", flag,
             spec);
  return steps;
}

std::string size_text(int h, int w) {
  return h == w ? std::to_string(h) : fmt::format("({},{})", h, w);
}
// resize's exact H x W, which is never written as one number: resize(S) is
// the short side.
std::string exact_size_text(int h, int w) {
  return fmt::format("({},{})", h, w);
}

// --- applying --------------------------------------------------------------

// Planes of one sample: c planes of h x w bytes, rows `stride` apart, planes
// `plane` apart (a crop keeps the strides of what it views).
struct Planes {
  const std::uint8_t* data;
  int c, h, w;
  std::ptrdiff_t stride, plane;
  const std::uint8_t* at(int k, int y) const { return data + k * plane + y * stride; }
  Planes crop(int y, int x, int ch, int cw) const {
    return {data + y * stride + x, c, ch, cw, stride, plane};
  }
};

struct Scratch {
  std::vector<std::uint8_t> a, b, row;
  bool use_a = true;
  std::uint8_t* next(std::size_t bytes) {
    std::vector<std::uint8_t>& v = use_a ? a : b;
    use_a = !use_a;
    if (v.size() < bytes) v.resize(bytes);
    return v.data();
  }
};

Planes resized(const Planes& in, int h, int w, Scratch& s) {
  if (h == in.h && w == in.w) return in;
  std::uint8_t* out = s.next(static_cast<std::size_t>(in.c) * h * w);
  for (int k = 0; k < in.c; ++k)
    resize_bilinear_into(ImageView{in.at(k, 0), in.h, in.w, 1, in.stride}, h, w,
                         out + static_cast<std::size_t>(k) * h * w, s.row);
  return {out, in.c, h, w, w, static_cast<std::ptrdiff_t>(h) * w};
}

// torchvision's RandomResizedCrop.get_params, with our stream.
void resized_crop_box(const Step& s, int H, int W, data_random::Xoshiro256& rng, int& i, int& j,
                      int& h, int& w) {
  const double area = static_cast<double>(H) * W;
  const double log_lo = std::log(s.ratio_lo), log_hi = std::log(s.ratio_hi);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * (s.lo + (s.hi - s.lo) * rng.uniform());
    const double ratio = std::exp(log_lo + (log_hi - log_lo) * rng.uniform());
    w = static_cast<int>(std::nearbyint(std::sqrt(target * ratio)));
    h = static_cast<int>(std::nearbyint(std::sqrt(target / ratio)));
    if (w > 0 && w <= W && h > 0 && h <= H) {
      i = static_cast<int>(rng.below(static_cast<std::uint64_t>(H - h + 1)));
      j = static_cast<int>(rng.below(static_cast<std::uint64_t>(W - w + 1)));
      return;
    }
  }
  const double in_ratio = static_cast<double>(W) / H;
  if (in_ratio < s.ratio_lo) {
    w = W;
    h = static_cast<int>(std::nearbyint(w / s.ratio_lo));
  } else if (in_ratio > s.ratio_hi) {
    h = H;
    w = static_cast<int>(std::nearbyint(h * s.ratio_hi));
  } else {
    w = W;
    h = H;
  }
  i = (H - h) / 2;
  j = (W - w) / 2;
}

// A contiguous copy of `in` in new scratch, for the steps that change pixels.
Planes copied(const Planes& in, Scratch& s) {
  std::uint8_t* o = s.next(static_cast<std::size_t>(in.c) * in.h * in.w);
  for (int k = 0; k < in.c; ++k)
    for (int y = 0; y < in.h; ++y)
      std::memcpy(o + (static_cast<std::size_t>(k) * in.h + y) * in.w, in.at(k, y),
                  static_cast<std::size_t>(in.w));
  return {o, in.c, in.h, in.w, in.w, static_cast<std::ptrdiff_t>(in.h) * in.w};
}

std::uint8_t to_byte(double v) {
  return static_cast<std::uint8_t>(std::clamp(std::nearbyint(v), 0.0, 255.0));
}

// ITU-R 601-2 luma, as PIL's convert("L") and torchvision's rgb_to_grayscale.
double luma(double r, double g, double b) {
  return 0.299 * r + 0.587 * g + 0.114 * b;
}

// torchvision's RandomRotation: the angle (degrees, counter-clockwise) about
// the centre, nearest neighbour, the corners filled with 0, the size kept.
Planes rotated(const Planes& in, double degrees, Scratch& s) {
  std::uint8_t* o = s.next(static_cast<std::size_t>(in.c) * in.h * in.w);
  const double a = degrees * M_PI / 180.0, cos_a = std::cos(a), sin_a = std::sin(a);
  const double cy = (in.h - 1) / 2.0, cx = (in.w - 1) / 2.0;
  for (int y = 0; y < in.h; ++y)
    for (int x = 0; x < in.w; ++x) {
      // Where this output pixel comes from: the inverse rotation (y grows down).
      const double dx = x - cx, dy = y - cy;
      const long sx = std::lround(cx + cos_a * dx - sin_a * dy);
      const long sy = std::lround(cy + sin_a * dx + cos_a * dy);
      const bool inside = sx >= 0 && sx < in.w && sy >= 0 && sy < in.h;
      for (int k = 0; k < in.c; ++k)
        o[(static_cast<std::size_t>(k) * in.h + y) * in.w + x] =
            inside ? in.at(k, static_cast<int>(sy))[sx] : 0;
    }
  return {o, in.c, in.h, in.w, in.w, static_cast<std::ptrdiff_t>(in.h) * in.w};
}

// Every channel becomes the luma of the pixel (one channel: unchanged).
Planes grayscaled(const Planes& in, Scratch& s) {
  if (in.c != 3) return in;
  Planes o = copied(in, s);
  auto* d = const_cast<std::uint8_t*>(o.data);
  const std::size_t n = static_cast<std::size_t>(o.h) * o.w;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t l = to_byte(luma(d[i], d[n + i], d[2 * n + i]));
    d[i] = d[n + i] = d[2 * n + i] = l;
  }
  return o;
}

// torchvision's ColorJitter without hue: brightness scales the pixels,
// contrast blends them with the image's mean luma, saturation with each
// pixel's own luma, each by a factor drawn from [max(0, 1-x), 1+x], in that
// order (torchvision draws the order too), rounded to bytes after each.
Planes color_jittered(const Planes& in, const Step& st, data_random::Xoshiro256& rng, Scratch& s) {
  const auto factor = [&](double x) {
    const double lo = std::max(0.0, 1 - x);
    return lo + (1 + x - lo) * rng.uniform();
  };
  const double fb = st.brightness > 0 ? factor(st.brightness) : 1;
  const double fc = st.contrast > 0 ? factor(st.contrast) : 1;
  const double fs = st.saturation > 0 ? factor(st.saturation) : 1;
  Planes o = copied(in, s);
  auto* d = const_cast<std::uint8_t*>(o.data);
  const std::size_t n = static_cast<std::size_t>(o.h) * o.w, all = n * o.c;
  const auto gray = [&](std::size_t i) {
    return o.c == 3 ? luma(d[i], d[n + i], d[2 * n + i]) : static_cast<double>(d[i]);
  };
  if (fb != 1)
    for (std::size_t i = 0; i < all; ++i) d[i] = to_byte(d[i] * fb);
  if (fc != 1) {
    double mean = 0;
    for (std::size_t i = 0; i < n; ++i) mean += gray(i);
    mean /= static_cast<double>(std::max<std::size_t>(n, 1));
    for (std::size_t i = 0; i < all; ++i) d[i] = to_byte(fc * d[i] + (1 - fc) * mean);
  }
  if (fs != 1 && o.c == 3)
    for (std::size_t i = 0; i < n; ++i) {
      const double g = gray(i);
      for (int k = 0; k < 3; ++k) {
        std::uint8_t& v = d[static_cast<std::size_t>(k) * n + i];
        v = to_byte(fs * v + (1 - fs) * g);
      }
    }
  return o;
}

}  // namespace

SampleTransform::SampleTransform(std::string spec, std::uint64_t seed, std::vector<Step> steps)
    : spec_(std::move(spec)), seed_(seed), steps_(std::move(steps)) {}
SampleTransform::~SampleTransform() = default;

std::shared_ptr<const SampleTransform> SampleTransform::parse(const std::string& spec,
                                                              std::uint64_t seed,
                                                              const std::string& flag) {
  BatchMixSpec batch;
  auto steps = parse_steps(spec, flag, flag == "--augment" ? &batch : nullptr);
  auto t = std::make_shared<SampleTransform>(spec, seed, std::move(steps));
  t->batch_mix_ = batch;
  return t;
}

BatchMixSpec SampleTransform::batch_mix_of(const std::string& spec, const std::string& flag) {
  BatchMixSpec batch;
  parse_steps(spec, flag, &batch);
  return batch;
}

std::string SampleTransform::eval_spec_of(const std::string& train_spec) {
  Parser parser(train_spec, "--augment");
  auto items = parser.items();
  std::erase_if(items, [](const auto& item) { return is_batch_step(item.first); });
  if (items.size() == 1 && is_preset(items[0].first)) {
    const std::string eval = preset(items[0].first, true);
    return eval.empty() ? "none" : eval;
  }
  std::string out;
  auto add = [&](const std::string& s) { out += (out.empty() ? "" : ", ") + s; };
  BatchMixSpec batch;  // never in evaluation
  for (const Step& s : parse_steps(train_spec, "--augment", &batch)) {
    switch (s.kind) {
      case Step::random_resized_crop:
        add(fmt::format("resize({})", s.h == s.w ? std::to_string(s.h * 256 / 224)
                                                 : size_text(s.h * 256 / 224, s.w * 256 / 224)));
        add(fmt::format("center_crop({})", size_text(s.h, s.w)));
        break;
      case Step::random_crop:
        add(fmt::format("center_crop({})", size_text(s.h, s.w)));
        break;
      case Step::hflip:
      case Step::vflip:
      case Step::rotation:
      case Step::color_jitter:
        break;  // random: evaluation sees the image as it is
      case Step::grayscale:
        // Always applied in training (p=1): the model only knows gray images.
        if (s.p >= 1) add("grayscale");
        break;
      case Step::resize:
        add(fmt::format("resize({})", s.w == 0 ? std::to_string(s.h) : exact_size_text(s.h, s.w)));
        break;
      case Step::center_crop:
        add(fmt::format("center_crop({})", size_text(s.h, s.w)));
        break;
      case Step::normalize: {
        std::string m, d;
        for (std::size_t k = 0; k < s.mean.size(); ++k) {
          m += fmt::format("{}{}", k ? "," : "", s.mean[k]);
          d += fmt::format("{}{}", k ? "," : "", s.std[k]);
        }
        add(fmt::format("normalize(mean=({}), std=({}))", m, d));
        break;
      }
    }
  }
  return out.empty() ? "none" : out;
}

bool SampleTransform::random() const {
  return std::any_of(steps_.begin(), steps_.end(), [](const Step& s) {
    return s.kind == Step::random_resized_crop || s.kind == Step::random_crop ||
           s.kind == Step::hflip || s.kind == Step::vflip || s.kind == Step::rotation ||
           s.kind == Step::color_jitter || (s.kind == Step::grayscale && s.p < 1);
  });
}

std::string SampleTransform::describe() const {
  std::string out;
  for (const Step& s : steps_) {
    std::string t;
    switch (s.kind) {
      case Step::random_resized_crop:
        t = fmt::format("random_resized_crop({}, scale=({},{}), ratio=({:.4g},{:.4g}))",
                        size_text(s.h, s.w), s.lo, s.hi, s.ratio_lo, s.ratio_hi);
        break;
      case Step::random_crop:
        t = fmt::format("random_crop({}, padding={})", size_text(s.h, s.w), s.padding);
        break;
      case Step::hflip:
        t = fmt::format("hflip(p={})", s.p);
        break;
      case Step::vflip:
        t = fmt::format("vflip(p={})", s.p);
        break;
      case Step::rotation:
        t = fmt::format("rotation({})", s.degrees);
        break;
      case Step::color_jitter:
        t = fmt::format("color_jitter(brightness={}, contrast={}, saturation={})", s.brightness,
                        s.contrast, s.saturation);
        break;
      case Step::grayscale:
        t = s.p >= 1 ? std::string("grayscale") : fmt::format("grayscale(p={})", s.p);
        break;
      case Step::resize:
        t = fmt::format("resize({})", s.w == 0 ? std::to_string(s.h) : exact_size_text(s.h, s.w));
        break;
      case Step::center_crop:
        t = fmt::format("center_crop({})", size_text(s.h, s.w));
        break;
      case Step::normalize:
        t = fmt::format("normalize(mean=({}), std=({}))", fmt::join(s.mean, ","),
                        fmt::join(s.std, ","));
        break;
    }
    out += (out.empty() ? "" : ", ") + t;
  }
  return out.empty() ? "none" : out;
}

std::vector<std::size_t> SampleTransform::output_shape(
    const std::vector<std::size_t>& stored) const {
  RT_CHECK(stored.size() == 3 && (stored[0] == 1 || stored[0] == 3),
           "{} needs images stored as C x H x W with 1 or 3 channels; the samples are {}", spec_,
           fmt::join(stored, "x"));
  const std::size_t c = stored[0];
  // 0 x 0: encoded images of varying size; a step that sets the size fixes it,
  // and a crop that does not fit is then found per sample.
  int h = static_cast<int>(stored[1]), w = static_cast<int>(stored[2]);
  bool known = h > 0 && w > 0;
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Step::random_resized_crop:
        h = s.h;
        w = s.w;
        known = true;
        break;
      case Step::random_crop:
        RT_CHECK(!known || (s.h <= h + 2 * s.padding && s.w <= w + 2 * s.padding),
                 "{}: random_crop({}) is larger than its {}x{} input (plus padding {})", spec_,
                 size_text(s.h, s.w), h, w, s.padding);
        h = s.h;
        w = s.w;
        known = true;
        break;
      case Step::center_crop:
        RT_CHECK(!known || (s.h <= h && s.w <= w),
                 "{}: center_crop({}) is larger than its {}x{} input", spec_, size_text(s.h, s.w),
                 h, w);
        h = s.h;
        w = s.w;
        known = true;
        break;
      case Step::resize:
        if (s.w == 0) {
          if (known) short_side_size(h, w, s.h, h, w);
        } else {
          h = s.h;
          w = s.w;
          known = true;
        }
        break;
      case Step::hflip:
      case Step::vflip:
      case Step::rotation:
      case Step::color_jitter:
      case Step::grayscale:
        break;
      case Step::normalize:
        RT_CHECK(s.mean.size() == c, "{}: normalize has {} values per channel but images have {}",
                 spec_, s.mean.size(), c);
        break;
    }
  }
  RT_CHECK(known,
           "{}: the images vary in size and no step fixes it (end with random_resized_crop, a "
           "crop or resize((H,W)))",
           spec_);
  return {c, static_cast<std::size_t>(h), static_cast<std::size_t>(w)};
}

namespace {
// (byte/255 - mean) / std = byte * 1/(255 std) - mean/std; without normalize
// the dataset's own scale and offset.
float channel_scale(const SampleTransform::Step* norm, int k, float scale) {
  return norm ? 1.0f / (255.0f * norm->std[static_cast<std::size_t>(k)]) : scale;
}
float channel_offset(const SampleTransform::Step* norm, int k, float offset) {
  return norm ? -norm->mean[static_cast<std::size_t>(k)] / norm->std[static_cast<std::size_t>(k)]
              : offset;
}
}  // namespace

template <typename Emit>
void SampleTransform::run(const std::uint8_t* stored, const std::vector<std::size_t>& shape,
                          std::uint64_t epoch, std::uint64_t index, Emit&& emit) const {
  thread_local Scratch scratch;
  Planes p{stored,
           static_cast<int>(shape[0]),
           static_cast<int>(shape[1]),
           static_cast<int>(shape[2]),
           static_cast<std::ptrdiff_t>(shape[2]),
           static_cast<std::ptrdiff_t>(shape[1] * shape[2])};
  // The sample's own stream: (seed, epoch) picks the stream family, the index
  // the stream, so no draw depends on which thread or rank runs it.
  std::uint64_t mix = seed_ ^ (0xA0761D6478BD642Full * (epoch + 1));
  data_random::Xoshiro256 rng(data_random::splitmix64(mix), index);
  const Step* norm = nullptr;
  for (const Step& s : steps_) {
    switch (s.kind) {
      case Step::random_resized_crop: {
        int i = 0, j = 0, h = 0, w = 0;
        resized_crop_box(s, p.h, p.w, rng, i, j, h, w);
        p = resized(p.crop(i, j, h, w), s.h, s.w, scratch);
        break;
      }
      case Step::random_crop: {
        if (s.padding > 0) {  // zero padding on every side, as torchvision's pad
          const int ph = p.h + 2 * s.padding, pw = p.w + 2 * s.padding;
          std::uint8_t* o = scratch.next(static_cast<std::size_t>(p.c) * ph * pw);
          std::memset(o, 0, static_cast<std::size_t>(p.c) * ph * pw);
          for (int k = 0; k < p.c; ++k)
            for (int y = 0; y < p.h; ++y)
              std::memcpy(o + (static_cast<std::size_t>(k) * ph + y + s.padding) * pw + s.padding,
                          p.at(k, y), static_cast<std::size_t>(p.w));
          p = {o, p.c, ph, pw, pw, static_cast<std::ptrdiff_t>(ph) * pw};
        }
        RT_CHECK(s.h <= p.h && s.w <= p.w, "{}: sample {}: random_crop({}) of a {}x{} image", spec_,
                 index, size_text(s.h, s.w), p.h, p.w);
        const int i = static_cast<int>(rng.below(static_cast<std::uint64_t>(p.h - s.h + 1)));
        const int j = static_cast<int>(rng.below(static_cast<std::uint64_t>(p.w - s.w + 1)));
        p = p.crop(i, j, s.h, s.w);
        break;
      }
      case Step::hflip: {
        if (rng.uniform() >= s.p) break;
        std::uint8_t* o = scratch.next(static_cast<std::size_t>(p.c) * p.h * p.w);
        for (int k = 0; k < p.c; ++k)
          for (int y = 0; y < p.h; ++y) {
            const std::uint8_t* src = p.at(k, y);
            std::uint8_t* dst = o + (static_cast<std::size_t>(k) * p.h + y) * p.w;
            for (int x = 0; x < p.w; ++x) dst[x] = src[p.w - 1 - x];
          }
        p = {o, p.c, p.h, p.w, p.w, static_cast<std::ptrdiff_t>(p.h) * p.w};
        break;
      }
      case Step::vflip: {
        if (rng.uniform() >= s.p) break;
        std::uint8_t* o = scratch.next(static_cast<std::size_t>(p.c) * p.h * p.w);
        for (int k = 0; k < p.c; ++k)
          for (int y = 0; y < p.h; ++y)
            std::memcpy(o + (static_cast<std::size_t>(k) * p.h + y) * p.w, p.at(k, p.h - 1 - y),
                        static_cast<std::size_t>(p.w));
        p = {o, p.c, p.h, p.w, p.w, static_cast<std::ptrdiff_t>(p.h) * p.w};
        break;
      }
      case Step::rotation:
        p = rotated(p, s.degrees * (2 * rng.uniform() - 1), scratch);
        break;
      case Step::color_jitter:
        p = color_jittered(p, s, rng, scratch);
        break;
      case Step::grayscale:
        if (rng.uniform() < s.p) p = grayscaled(p, scratch);
        break;
      case Step::resize: {
        int h = s.h, w = s.w;
        if (s.w == 0) short_side_size(p.h, p.w, s.h, h, w);
        p = resized(p, h, w, scratch);
        break;
      }
      case Step::center_crop:
        RT_CHECK(s.h <= p.h && s.w <= p.w, "{}: sample {}: center_crop({}) of a {}x{} image", spec_,
                 index, size_text(s.h, s.w), p.h, p.w);
        p = p.crop(center_offset(p.h, s.h), center_offset(p.w, s.w), s.h, s.w);
        break;
      case Step::normalize:
        norm = &s;
        break;
    }
  }
  emit(p, norm);
}

void SampleTransform::apply(const std::uint8_t* stored, const std::vector<std::size_t>& shape,
                            float scale, float offset, std::uint64_t epoch, std::uint64_t index,
                            float* out) const {
  run(stored, shape, epoch, index, [&](const Planes& p, const Step* norm) {
    for (int k = 0; k < p.c; ++k) {
      const float ks = channel_scale(norm, k, scale), ko = channel_offset(norm, k, offset);
      for (int y = 0; y < p.h; ++y) {
        const std::uint8_t* src = p.at(k, y);
        float* dst = out + (static_cast<std::size_t>(k) * p.h + y) * p.w;
        for (int x = 0; x < p.w; ++x) dst[x] = kernels::normalize_byte(src[x], ks, ko);
      }
    }
  });
}

void SampleTransform::apply_bytes(const std::uint8_t* stored, const std::vector<std::size_t>& shape,
                                  std::uint64_t epoch, std::uint64_t index,
                                  std::uint8_t* out) const {
  run(stored, shape, epoch, index, [&](const Planes& p, const Step*) {
    for (int k = 0; k < p.c; ++k)
      for (int y = 0; y < p.h; ++y)
        std::memcpy(out + (static_cast<std::size_t>(k) * p.h + y) * p.w, p.at(k, y),
                    static_cast<std::size_t>(p.w));
  });
}

void SampleTransform::widening(std::size_t channels, float scale, float offset,
                               std::vector<float>& channel_scales,
                               std::vector<float>& channel_offsets) const {
  const Step* norm = nullptr;
  for (const Step& s : steps_)
    if (s.kind == Step::normalize) norm = &s;
  channel_scales.resize(channels);
  channel_offsets.resize(channels);
  for (std::size_t k = 0; k < channels; ++k) {
    channel_scales[k] = channel_scale(norm, static_cast<int>(k), scale);
    channel_offsets[k] = channel_offset(norm, static_cast<int>(k), offset);
  }
}

}  // namespace ringtrain
