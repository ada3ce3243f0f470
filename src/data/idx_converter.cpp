// convert idx: IDX image and label files (gzipped or not) to /train and /test.
#include <algorithm>
#include <cmath>

#include "data/progress.h"
#include "ringtrain/core/check.h"
#include "ringtrain/data/converters.h"
#include "ringtrain/data/dataset_writer.h"
#include "ringtrain/data/idx_file.h"
#include "ringtrain/data/output_guard.h"

namespace ringtrain {

const std::vector<std::string>& fashion_mnist_class_names() {
  static const std::vector<std::string> names = {"T-shirt/top", "Trouser",   "Pullover", "Dress",
                                                 "Coat",        "Sandal",    "Shirt",    "Sneaker",
                                                 "Bag",         "Ankle boot"};
  return names;
}

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::vector<std::string> digit_names() {
  std::vector<std::string> v;
  for (int i = 0; i < 10; ++i) v.push_back(std::to_string(i));
  return v;
}

std::vector<std::string> resolve_class_names(const IdxConvertOptions& o) {
  const std::string& c = o.class_names;
  if (c == "none") return {};
  if (c == "fashion-mnist") return fashion_mnist_class_names();
  if (c == "mnist") return digit_names();
  if (c == "auto") {
    const std::string all = lower(o.train_images + " " + o.test_images);
    if (all.find("fashion") != std::string::npos) return fashion_mnist_class_names();
    if (all.find("mnist") != std::string::npos) return digit_names();
    return {};
  }
  std::vector<std::string> names;
  std::size_t pos = 0;
  while (pos <= c.size()) {
    const std::size_t end = std::min(c.find(',', pos), c.size());
    names.push_back(c.substr(pos, end - pos));
    RT_CHECK(!names.back().empty(), "--class-names '{}': empty name", c);
    pos = end + 1;
  }
  return names;
}

struct IdxSplit {
  IdxArray images;
  std::vector<std::int32_t> labels;
};

IdxSplit load_split(const std::string& images_path, const std::string& labels_path) {
  IdxSplit s;
  s.images = read_idx(images_path);
  RT_CHECK(s.images.type == IdxType::u8 || s.images.type == IdxType::f32,
           "IDX file {}: images of element type 0x{:02x} are not supported (expected 0x08 ubyte or "
           "0x0d float)",
           images_path, static_cast<unsigned>(s.images.type));
  RT_CHECK(s.images.dims.size() >= 2,
           "IDX file {}: images need >= 2 dimensions (N x sample), got {}", images_path,
           s.images.dims.size());
  const IdxArray labels = read_idx(labels_path);
  RT_CHECK(labels.dims.size() == 1, "IDX file {}: labels need 1 dimension, got {}", labels_path,
           labels.dims.size());
  RT_CHECK(labels.dims[0] == s.images.dims[0], "{} has {} images but {} has {} labels", images_path,
           s.images.dims[0], labels_path, labels.dims[0]);
  s.labels.resize(labels.dims[0]);
  for (std::size_t i = 0; i < s.labels.size(); ++i) {
    const unsigned char* p = labels.data.data() + i * idx_type_size(labels.type);
    switch (labels.type) {
      case IdxType::u8:
        s.labels[i] = *p;
        break;
      case IdxType::i8:
        s.labels[i] = static_cast<std::int8_t>(*p);
        break;
      case IdxType::i16:
        s.labels[i] = *reinterpret_cast<const std::int16_t*>(p);
        break;
      case IdxType::i32:
        s.labels[i] = *reinterpret_cast<const std::int32_t*>(p);
        break;
      default:
        RT_CHECK(false, "IDX file {}: labels must be integers, got element type 0x{:02x}",
                 labels_path, static_cast<unsigned>(labels.type));
    }
    RT_CHECK(s.labels[i] >= 0, "IDX file {}: negative label {} at index {}", labels_path,
             s.labels[i], i);
  }
  return s;
}

std::vector<std::size_t> sample_shape_of(const IdxArray& images) {
  std::vector<std::size_t> shape;
  if (images.dims.size() == 3) shape.push_back(1);  // H x W images: one channel (C,H,W)
  for (std::size_t k = 1; k < images.dims.size(); ++k) shape.push_back(images.dims[k]);
  return shape;
}

}  // namespace

ConvertSummary convert_idx(const IdxConvertOptions& o) {
  guard_output(o.output,
               {{"--train-images", o.train_images},
                {"--train-labels", o.train_labels},
                {"--test-images", o.test_images},
                {"--test-labels", o.test_labels}},
               o.force);
  const IdxSplit train = load_split(o.train_images, o.train_labels);
  const IdxSplit test = load_split(o.test_images, o.test_labels);
  RT_CHECK(train.images.type == test.images.type &&
               sample_shape_of(train.images) == sample_shape_of(test.images),
           "{} and {} hold different sample types or shapes ({} vs {})", o.train_images,
           o.test_images, shape_string(sample_shape_of(train.images)),
           shape_string(sample_shape_of(test.images)));
  const std::vector<std::string> names = resolve_class_names(o);
  std::int32_t max_label = 0;
  for (const auto* s : {&train, &test})
    for (std::int32_t l : s->labels) max_label = std::max(max_label, l);
  int classes = o.num_classes > 0 ? o.num_classes
                : names.empty()   ? max_label + 1
                                  : static_cast<int>(names.size());
  RT_CHECK(names.empty() || names.size() == static_cast<std::size_t>(classes),
           "--class-names gives {} names but there are {} classes", names.size(), classes);
  RT_CHECK(max_label < classes,
           "label {} in the IDX input is outside [0, {}) (--classes / --class-names)", max_label,
           classes);

  const bool u8 = train.images.type == IdxType::u8;
  float scale = 1.0f / 255.0f, offset = 0.0f;
  RT_CHECK(o.normalize == "unit" || o.normalize == "standard",
           "--normalize '{}': expected unit or standard", o.normalize);
  if (u8 && o.normalize == "standard") {
    double sum = 0, sq = 0;
    for (unsigned char v : train.images.data) {
      sum += v;
      sq += static_cast<double>(v) * v;
    }
    const double cnt = static_cast<double>(train.images.data.size());
    const double mean = sum / cnt / 255.0;
    const double var = sq / cnt / (255.0 * 255.0) - mean * mean;
    const double std = std::sqrt(std::max(var, 1e-12));
    scale = static_cast<float>(1.0 / (255.0 * std));
    offset = static_cast<float>(-mean / std);
  }

  DatasetWriter writer(o.output);
  ConvertSummary summary;
  for (const auto& [name, split] :
       {std::pair<const char*, const IdxSplit*>{"train", &train}, {"test", &test}}) {
    SplitSpec spec;
    spec.name = name;
    spec.n = split->images.dims[0];
    spec.sample_shape = sample_shape_of(split->images);
    spec.dtype = u8 ? SampleDType::u8 : SampleDType::f32;
    spec.num_classes = classes;
    spec.class_names = names;
    spec.scale = scale;
    spec.offset = offset;
    writer.begin_split(spec);
    const std::size_t row_bytes = split->images.data.size() / std::max<std::size_t>(spec.n, 1);
    ConvertProgress progress(name, spec.n, split->images.data.size() >= kProgressBytes);
    const std::size_t slab = 8192;
    for (std::size_t b = 0; b < spec.n; b += slab) {
      const std::size_t count = std::min(slab, spec.n - b);
      writer.append(split->images.data.data() + b * row_bytes, split->labels.data() + b, count);
      progress.update(b + count);
    }
    writer.end_split();
    summary.text +=
        fmt::format("/{}: {} samples of {} {}, {} classes\n", name, spec.n,
                    shape_string(spec.sample_shape), sample_dtype_name(spec.dtype), classes);
  }
  writer.commit();
  if (u8)
    summary.text +=
        fmt::format("value = byte * {} + {} ({} normalisation)\n", scale, offset, o.normalize);
  return summary;
}

}  // namespace ringtrain
