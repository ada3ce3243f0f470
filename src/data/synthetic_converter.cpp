// convert synthetic: a reproducible, learnable classification set.
#include <algorithm>
#include <cmath>

#include "data/progress.h"
#include "data/random.h"
#include "ringtrain/core/check.h"
#include "ringtrain/data/converters.h"
#include "ringtrain/data/dataset_writer.h"
#include "ringtrain/data/output_guard.h"

namespace ringtrain {

ConvertSummary make_synthetic(const SyntheticOptions& o) {
  guard_output(o.output, {}, o.force);
  RT_CHECK(o.n >= 1, "--n must be >= 1");
  RT_CHECK(o.test_n >= 1, "--test-n must be >= 1");
  RT_CHECK(o.classes >= 2, "--classes must be >= 2, got {}", o.classes);
  RT_CHECK(!o.shape.empty(), "--shape must not be empty");
  RT_CHECK(o.dtype == "f32" || o.dtype == "u8", "--dtype '{}': expected f32 or u8", o.dtype);
  RT_CHECK(o.noise >= 0 && std::isfinite(o.noise), "--noise {} must be >= 0", o.noise);
  std::size_t elems = 1;
  for (std::size_t s : o.shape) elems *= s;
  const bool u8 = o.dtype == "u8";

  // Stream 0: the class prototypes; streams 1 and 2: train and test samples.
  data_random::Xoshiro256 proto_rng(o.seed, 0);
  std::vector<float> prototypes(static_cast<std::size_t>(o.classes) * elems);
  for (float& p : prototypes) p = static_cast<float>(proto_rng.uniform());

  DatasetWriter writer(o.output);
  ConvertSummary summary;
  const std::size_t slab = std::max<std::size_t>(1, (8u << 20) / (elems * 4));
  std::vector<float> xf;
  std::vector<unsigned char> xb;
  std::vector<std::int32_t> y;
  std::uint64_t stream = 1;
  for (const auto& [name, n] :
       {std::pair<const char*, std::size_t>{"train", o.n}, {"test", o.test_n}}) {
    SplitSpec spec;
    spec.name = name;
    spec.n = n;
    spec.sample_shape = o.shape;
    spec.dtype = u8 ? SampleDType::u8 : SampleDType::f32;
    spec.num_classes = o.classes;
    spec.scale = 1.0f / 255.0f;
    spec.offset = 0.0f;
    writer.begin_split(spec);
    data_random::Xoshiro256 rng(o.seed, stream++);
    ConvertProgress progress(name, n, n * elems * (u8 ? 1 : 4) >= kProgressBytes);
    for (std::size_t b = 0; b < n; b += slab) {
      const std::size_t count = std::min(slab, n - b);
      xf.resize(count * elems);
      y.resize(count);
      for (std::size_t i = 0; i < count; ++i) {
        const auto c = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(o.classes)));
        y[i] = c;
        const float* proto = prototypes.data() + static_cast<std::size_t>(c) * elems;
        for (std::size_t e = 0; e < elems; ++e)
          xf[i * elems + e] = proto[e] + static_cast<float>(o.noise * rng.normal());
      }
      if (u8) {
        xb.resize(xf.size());
        for (std::size_t k = 0; k < xf.size(); ++k)
          xb[k] = static_cast<unsigned char>(std::lround(std::clamp(xf[k], 0.0f, 1.0f) * 255.0f));
        writer.append(xb.data(), y.data(), count);
      } else {
        writer.append(xf.data(), y.data(), count);
      }
      progress.update(b + count);
    }
    writer.end_split();
    summary.text += fmt::format("/{}: {} samples of {} {}, {} classes (seed {}, noise {})\n", name,
                                n, shape_string(o.shape), sample_dtype_name(spec.dtype), o.classes,
                                o.seed, o.noise);
  }
  writer.commit();
  return summary;
}

}  // namespace ringtrain
