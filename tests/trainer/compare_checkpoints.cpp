// compare_checkpoints A.h5 B.h5 [--exact | --rtol R --atol A | --rel-l2 D] [--any-step]
// compare_checkpoints --hash A.h5
// compare_checkpoints --tensor-hashes A.h5
// Exit 0 when every parameter (and optimizer state, and model state) tensor of A matches B:
// bit for bit with --exact, else |a - b| <= rtol * max(|a|, |b|) + atol, or with
// --rel-l2 each tensor's relative L2 distance |a - b| / |b| at most D: for two
// runs whose convolution algorithms round differently (cuDNN chooses by batch
// and by --tf32), where a small element (a momentum near zero) can move by
// more than any elementwise rtol while the tensor as a whole agrees; a wrong
// gradient moves whole tensors, by far more.
// --any-step compares the tensors of checkpoints taken at different steps (a
// skipped update leaves the state of the step before).
// Prints the largest difference, so a failing test shows by how much, and for
// every tensor with an element outside the tolerance (every tensor with
// --report) a line: elements outside, the largest |a - b|, the tensor's RMS,
// the relative L2 distance |a - b| / |b| and the worst element's values. A
// flat optimizer state the size of the parameters is split by parameter.
// --hash prints the hash of A's parameters in model order: the hash a resumed
// `ringtrain train` logs for the parameters every rank starts from.
// --tensor-hashes prints one line per tensor, "group/name hash", for the
// parameters, the optimizer state (a flat state split by parameter) and the
// model state: a record that names the tensor that moves when a change was
// meant to keep every bit (tests/model/storage_reference.sh).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/core/error.h"
#include "ringtrain/sync/run_agreement.h"
#include "ringtrain/train/checkpoint.h"

using namespace ringtrain;

namespace {
// Calls part(name, begin, end) for the ranges of tensor `name` (size elements)
// that the reports name: an optimizer state the size of the parameters
// (momentum, Adam's moments) split by parameter as "name/param", any other
// tensor whole.
template <typename Part>
void for_each_part(const LoadedCheckpoint& c, const std::string& name, std::size_t size,
                   bool optimizer_state, Part&& part) {
  std::size_t param_count = 0;
  for (const auto& param : c.params) param_count += param.second.size();
  if (!optimizer_state || size != param_count || c.params.size() < 2) {
    part(name, std::size_t{0}, size);
    return;
  }
  std::size_t at = 0;
  for (const auto& param : c.params) {
    part(name + "/" + param.first, at, at + param.second.size());
    at += param.second.size();
  }
}
}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && !std::strcmp(argv[1], "--hash")) {
    try {
      const LoadedCheckpoint a = read_checkpoint(argv[2]);
      std::vector<float> flat;
      for (const auto& tensor : a.params)
        flat.insert(flat.end(), tensor.second.begin(), tensor.second.end());
      std::printf("%016llx\n",
                  static_cast<unsigned long long>(hash_bytes(flat.data(), flat.size() * 4)));
      return 0;
    } catch (const Error& e) {
      std::fprintf(stderr, "compare_checkpoints: %s\n", e.what());
      return 2;
    }
  }
  if (argc == 3 && !std::strcmp(argv[1], "--tensor-hashes")) {
    try {
      const LoadedCheckpoint a = read_checkpoint(argv[2]);
      const auto line = [](const std::string& name, const float* v, std::size_t n) {
        std::printf("%s %016llx\n", name.c_str(),
                    static_cast<unsigned long long>(hash_bytes(v, n * sizeof(float))));
      };
      for (const auto& [name, v] : a.params) line("params/" + name, v.data(), v.size());
      for (const auto& [name, v] : a.optimizer)
        for_each_part(a, "optimizer/" + name, v.size(), true,
                      [&, &v = v](const std::string& part, std::size_t begin, std::size_t end) {
                        line(part, v.data() + begin, end - begin);
                      });
      for (const auto& [name, v] : a.buffers) line("buffers/" + name, v.data(), v.size());
      return 0;
    } catch (const Error& e) {
      std::fprintf(stderr, "compare_checkpoints: %s\n", e.what());
      return 2;
    }
  }
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: compare_checkpoints A.h5 B.h5 [--exact | --rtol R --atol A | --rel-l2 D] "
                 "[--any-step] [--report]\n"
                 "       compare_checkpoints --hash A.h5\n"
                 "       compare_checkpoints --tensor-hashes A.h5\n");
    return 2;
  }
  bool exact = false, any_step = false, report = false;
  double rtol = 1e-5, atol = 1e-6, rel_l2 = -1;
  // A bound is a whole non-negative number: "abc" or "-1" would otherwise
  // compare by another rule than the one asked for.
  const auto bound = [](const char* flag, const char* text, double* value) {
    char* end = nullptr;
    const double v = std::strtod(text, &end);
    if (end == text || *end != '\0' || !std::isfinite(v) || !(v >= 0)) {
      std::fprintf(stderr, "compare_checkpoints: %s %s: expected a finite number >= 0\n", flag,
                   text);
      return false;
    }
    *value = v;
    return true;
  };
  bool flags_ok = true;
  for (int i = 3; i < argc && flags_ok; ++i) {
    if (!std::strcmp(argv[i], "--exact"))
      exact = true;
    else if (!std::strcmp(argv[i], "--any-step"))
      any_step = true;
    else if (!std::strcmp(argv[i], "--report"))
      report = true;
    else if (!std::strcmp(argv[i], "--rtol") && i + 1 < argc)
      flags_ok = bound(argv[i], argv[i + 1], &rtol), ++i;
    else if (!std::strcmp(argv[i], "--atol") && i + 1 < argc)
      flags_ok = bound(argv[i], argv[i + 1], &atol), ++i;
    else if (!std::strcmp(argv[i], "--rel-l2") && i + 1 < argc)
      flags_ok = bound(argv[i], argv[i + 1], &rel_l2), ++i;
    else {
      // A flag this tool does not know would otherwise compare by another rule.
      std::fprintf(stderr, "compare_checkpoints: unknown or incomplete flag %s\n", argv[i]);
      return 2;
    }
  }
  if (!flags_ok) return 2;
  if (exact && rel_l2 >= 0) {
    std::fprintf(stderr, "compare_checkpoints: --exact and --rel-l2 exclude each other\n");
    return 2;
  }
  try {
    const LoadedCheckpoint a = read_checkpoint(argv[1]);
    const LoadedCheckpoint b = read_checkpoint(argv[2]);
    if (a.params.size() != b.params.size() || (!any_step && a.meta.step != b.meta.step)) {
      std::printf("different structure: %zu vs %zu tensors, step %llu vs %llu\n", a.params.size(),
                  b.params.size(), static_cast<unsigned long long>(a.meta.step),
                  static_cast<unsigned long long>(b.meta.step));
      return 1;
    }
    std::size_t bad = 0, total = 0, tensors = 0, bad_tensors = 0;
    double worst = 0;
    std::string worst_name;
    // One tensor's elements [begin, end), reported under name.
    auto compare_range = [&](const std::string& name, const std::vector<float>& va,
                             const std::vector<float>& vb, std::size_t begin, std::size_t end) {
      std::size_t outside = 0, worst_at = begin;
      double max_diff = 0, sq_diff = 0, sq_b = 0;
      for (std::size_t i = begin; i < end; ++i) {
        ++total;
        const double x = va[i], y = vb[i];
        const double diff = std::fabs(x - y);
        const bool ok = exact ? std::memcmp(&va[i], &vb[i], sizeof(float)) == 0
                              : diff <= rtol * std::max(std::fabs(x), std::fabs(y)) + atol;
        if (!ok) ++outside;
        sq_diff += diff * diff;
        sq_b += y * y;
        if (diff > max_diff) max_diff = diff, worst_at = i;
        const double rel = diff / std::max(1e-12, std::max(std::fabs(x), std::fabs(y)));
        if (diff > 0 && rel > worst) {
          worst = rel;
          worst_name = name + "[" + std::to_string(i - begin) + "]";
        }
      }
      const double l2 = sq_b > 0 ? std::sqrt(sq_diff / sq_b) : std::sqrt(sq_diff);
      ++tensors;
      const bool tensor_bad = rel_l2 >= 0 ? !(l2 <= rel_l2) : outside > 0;
      if (tensor_bad) ++bad_tensors;
      if (rel_l2 < 0) bad += outside;
      if (tensor_bad || report)
        std::printf(
            "  %-28s %8zu of %8zu outside; max |a-b| %.3g (a %.6g, b %.6g); rms(b) %.3g; "
            "|a-b|/|b| %.3g%s\n",
            name.c_str(), outside, end - begin, max_diff, static_cast<double>(va[worst_at]),
            static_cast<double>(vb[worst_at]),
            std::sqrt(sq_b / static_cast<double>(std::max<std::size_t>(1, end - begin))), l2,
            rel_l2 >= 0 && tensor_bad ? " (over the relative L2 bound)" : "");
    };
    auto compare = [&](const auto& ta, const auto& tb) {
      for (std::size_t t = 0; t < ta.size(); ++t) {
        const auto& va = ta[t].second;
        const auto& vb = tb[t].second;
        if (ta[t].first != tb[t].first || va.size() != vb.size()) {
          std::printf("tensor %zu differs in name or size: %s vs %s\n", t, ta[t].first.c_str(),
                      tb[t].first.c_str());
          ++bad;
          ++tensors;
          ++bad_tensors;
          continue;
        }
        for_each_part(a, ta[t].first, va.size(), &ta == &a.optimizer,
                      [&](const std::string& part, std::size_t begin, std::size_t end) {
                        compare_range(part, va, vb, begin, end);
                      });
      }
    };
    compare(a.params, b.params);
    // A checkpoint without the other's optimizer state is another structure.
    if (a.optimizer.size() != b.optimizer.size()) {
      std::printf("%s has %zu optimizer state tensors, %s has %zu\n", argv[1], a.optimizer.size(),
                  argv[2], b.optimizer.size());
      return 1;
    }
    compare(a.optimizer, b.optimizer);
    // Non-trainable state (BatchNorm's running statistics) must match too.
    if (a.buffers.size() != b.buffers.size()) {
      std::printf("%s has %zu state tensors, %s has %zu\n", argv[1], a.buffers.size(), argv[2],
                  b.buffers.size());
      return 1;
    }
    compare(a.buffers, b.buffers);
    if (rel_l2 >= 0) {
      std::printf(
          "%s vs %s: %zu of %zu tensors over relative L2 distance %.3g; largest elementwise "
          "relative difference %.3g%s%s\n",
          argv[1], argv[2], bad_tensors, tensors, rel_l2, worst, worst_name.empty() ? "" : " at ",
          worst_name.c_str());
      return bad_tensors == 0 ? 0 : 1;
    }
    std::printf("%s vs %s: %zu of %zu elements outside %s; largest relative difference %.3g%s%s\n",
                argv[1], argv[2], bad, total, exact ? "bit-exact" : "tolerance", worst,
                worst_name.empty() ? "" : " at ", worst_name.c_str());
    return bad == 0 ? 0 : 1;
  } catch (const Error& e) {
    std::fprintf(stderr, "compare_checkpoints: %s\n", e.what());
    return 2;
  }
}
