// `ringtrain predict`: per-sample predictions of a checkpoint, as CSV: on a
// split (index, predicted class, its probability, the true label, the class
// names when the set has them, and with --logits every class's logit), or on a
// folder of new images that have no labels (--images: path, predicted class,
// its probability, its name when the set has names, and with --logits every
// class's logit: the split's columns, with the path for the index and no
// label). Inputs get the evaluation transform the checkpoint was trained
// with. The CSV is written under a temporary name and renamed at the end: a
// failed or interrupted run leaves neither a half-written file nor the
// temporary.
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "apps/command.h"
#include "apps/eval_transform_choice.h"
#include "data/image_decode.h"
#include "data/image_fit.h"
#include "data/image_folder.h"
#include "ringtrain/comm/control_channel.h"
#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/core/temp_file_guard.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/output_guard.h"
#include "ringtrain/data/prefetcher.h"
#include "ringtrain/data/sample_transform.h"
#include "ringtrain/model/plugin.h"
#include "ringtrain/tensor/device_memory.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/checkpoint_loader.h"

namespace ringtrain::apps {
namespace {

struct PredictFlags {
  std::string ckpt, data, split = "test", out;
  std::size_t batch = 256;
  bool logits = false;  // also every class's logit
  std::vector<std::string> plugins;
  bool force = false;
  std::string eval_transform, fit = "crop";
  std::vector<std::string> images;  // files and folders, in the order given
  std::string precision = "fp32";
  std::string layout = "auto";
  std::size_t loader_threads = 1;
};

// The winner of one row of logits and its softmax probability, computed
// stably from the logits.
std::pair<std::size_t, double> top1(const float* row, std::size_t nc) {
  std::size_t best = 0;
  for (std::size_t k = 1; k < nc; ++k)
    if (row[k] > row[best]) best = k;
  double denom = 0;
  for (std::size_t k = 0; k < nc; ++k) denom += std::exp(static_cast<double>(row[k] - row[best]));
  return {best, 1.0 / denom};
}

// --logits: one column per class, at the end of the header and of each row.
void write_logit_header(std::ofstream& out, bool logits, std::size_t nc) {
  if (logits)
    for (std::size_t k = 0; k < nc; ++k) out << ",logit_" << k;
  out << '\n';
}
void write_logits(std::ofstream& out, const float* row, std::size_t nc) {
  for (std::size_t k = 0; k < nc; ++k) out << ',' << fmt::format("{:.9g}", row[k]);
}

// The image files --images names: a file as it is (whatever its extension:
// the decoder says if it is no image), a folder as every .jpg/.jpeg/.png
// under it (sorted paths), in the order given. Listed before anything is
// written, so a missing path or an empty folder is refused at once.
std::vector<std::string> image_paths(const std::vector<std::string>& given) {
  namespace fs = std::filesystem;
  std::vector<std::string> paths;
  for (const std::string& item : given) {
    std::error_code ec;
    if (fs::is_regular_file(item, ec)) {
      paths.push_back(item);
      continue;
    }
    RT_CHECK(fs::is_directory(item, ec), "--images {}: no such file or folder", item);
    std::vector<std::string> found;
    for (auto it = fs::recursive_directory_iterator(item, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_regular_file(ec) && has_image_extension(it->path().filename().string()))
        found.push_back(it->path().string());
    RT_CHECK(!ec, "--images {}: cannot list: {}", item, ec.message());
    RT_CHECK(!found.empty(), "--images {}: no .jpg, .jpeg or .png file in the folder", item);
    std::sort(found.begin(), found.end());
    paths.insert(paths.end(), found.begin(), found.end());
  }
  return paths;
}

// What --images reads new images with: the stored size they are fitted to
// (as `convert images` did), the bytes' scale and offset, the evaluation
// transform, the classes and their names. From a data set (--data, else the
// checkpoint's training data), or from the record a checkpoint keeps of its
// training data ("input" in its config), which needs no data file.
struct ImageInput {
  std::vector<std::size_t> stored;  // C, H, W
  float scale = 1, offset = 0;
  int classes = 0;
  std::vector<std::string> names;  // empty when the data has none
  std::shared_ptr<const SampleTransform> transform;
  std::vector<std::size_t> sample_shape() const {
    return transform ? transform->output_shape(stored) : stored;
  }
};

ImageInput image_input_of(Dataset& data) {
  RT_CHECK(data.stored_dtype() == SampleDType::u8 && data.stored_shape().size() == 3,
           "--images needs --data to be an image set (uint8 C x H x W); {} holds {} {}",
           data.describe(), shape_string(data.stored_shape()),
           sample_dtype_name(data.stored_dtype()));
  return {data.stored_shape(), data.scale(),       data.offset(),
          data.num_classes(),  data.class_names(), nullptr};
}

// The checkpoint's record of its training data, with the evaluation
// transform (--eval-transform, else the training run's); nullopt for a
// checkpoint written before the record existed.
std::optional<ImageInput> recorded_image_input(const PredictFlags& f, const std::string& path) {
  const nlohmann::json config =
      nlohmann::json::parse(read_checkpoint(path).meta.config_json, nullptr, false);
  if (!config.is_object() || !config.contains("input")) return std::nullopt;
  ImageInput in;
  try {
    const nlohmann::json& r = config.at("input");
    in.stored = r.at("stored_shape").get<std::vector<std::size_t>>();
    in.scale = r.at("scale").get<float>();
    in.offset = r.at("offset").get<float>();
    in.classes = r.at("classes").get<int>();
    if (r.contains("class_names")) in.names = r.at("class_names").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    RT_CHECK(false, "--ckpt {}: its record of the training data ('input') is damaged: {}", path,
             e.what());
  }
  RT_CHECK(in.stored.size() == 3 && in.classes > 0 &&
               (in.names.empty() || in.names.size() == static_cast<std::size_t>(in.classes)),
           "--ckpt {}: its record of the training data ('input') is damaged: shape {}, {} "
           "classes, {} names",
           path, shape_string(in.stored), in.classes, in.names.size());
  std::string spec = f.eval_transform;
  if (spec.empty() && config.contains("eval_transform") && config["eval_transform"].is_string())
    spec = config["eval_transform"].get<std::string>();
  if (!spec.empty() && spec != "none")
    in.transform = SampleTransform::parse(spec, 0, "--eval-transform");
  log0("--images: image size {} and {} classes{} from checkpoint {}{}", shape_string(in.stored),
       in.classes, in.names.empty() ? "" : " with their names", path,
       in.transform ? fmt::format(", evaluation transform {}", in.transform->describe()) : "");
  return in;
}

// Each image decoded and fitted to the stored size as `convert images` would,
// then the evaluation transform. No labels: the rows say what the model sees.
void predict_folder(const PredictFlags& f, const std::vector<std::string>& paths,
                    const ImageInput& input, Model& model, Device device, std::ofstream& out) {
  const std::vector<std::size_t>& stored = input.stored;
  ImageGeometry g;
  g.channels = static_cast<int>(stored[0]);
  g.height = static_cast<int>(stored[1]);
  g.width = static_cast<int>(stored[2]);
  g.fit = f.fit;
  std::size_t elems = 1;
  for (std::size_t d : input.sample_shape()) elems *= d;
  const std::size_t raw = stored[0] * stored[1] * stored[2];
  const auto nc = static_cast<std::size_t>(input.classes);
  const std::vector<std::string>& names = input.names;
  // The split's column order: the path stands where the index does, and
  // there is no label.
  out << "path,predicted,probability" << (names.empty() ? "" : ",predicted_name");
  write_logit_header(out, f.logits, nc);
  std::vector<std::uint8_t> bytes(raw), scratch;
  Image sized;
  std::vector<float> x(f.batch * elems), logits;
  std::vector<std::int32_t> no_labels(f.batch, 0);
  void* dx = device.is_cuda() ? device_allocate(x.size() * sizeof(float), device) : nullptr;
  void* dy = device.is_cuda() ? device_allocate(no_labels.size() * 4, device) : nullptr;
  if (dy)
    copy_view(view_of(static_cast<std::int32_t*>(dy), no_labels.size(), device),
              view_of(no_labels.data(), no_labels.size()));
  try {
    for (std::size_t b = 0; b < paths.size(); b += f.batch) {
      const std::size_t n = std::min(f.batch, paths.size() - b);
      for (std::size_t i = 0; i < n; ++i) {
        const Image img = decode_image(paths[b + i], read_file_bytes(paths[b + i]), g.channels);
        fit_image(img, g, bytes.data(), scratch, sized);
        if (input.transform)
          input.transform->apply(bytes.data(), stored, input.scale, input.offset, 0, b + i,
                                 x.data() + i * elems);
        else
          for (std::size_t e = 0; e < raw; ++e)
            x[i * elems + e] = static_cast<float>(bytes[e]) * input.scale + input.offset;
      }
      const float* in = x.data();
      const std::int32_t* labels = no_labels.data();
      if (dx) {
        copy_view(view_of(static_cast<float*>(dx), n * elems, device),
                  view_of(x.data(), n * elems));
        in = static_cast<const float*>(dx);
        labels = static_cast<const std::int32_t*>(dy);
      }
      model.forward(in, labels, n, /*training=*/false);
      model.synchronize();
      logits.resize(n * nc);
      model.copy_logits(0, logits.data(), logits.size());
      for (std::size_t i = 0; i < n; ++i) {
        const float* row = logits.data() + i * nc;
        const auto [best, p] = top1(row, nc);
        out << paths[b + i] << ',' << best << ',' << fmt::format("{:.6f}", p);
        if (!names.empty()) out << ',' << (best < names.size() ? names[best] : "");
        if (f.logits) write_logits(out, row, nc);
        out << '\n';
      }
    }
  } catch (...) {
    if (dx) device_free(dx, device);
    if (dy) device_free(dy, device);
    throw;
  }
  if (dx) device_free(dx, device);
  if (dy) device_free(dy, device);
}

// The data set that gives --images the stored size and the class names: --data,
// else the one the checkpoint's training run read (recorded in its config).
std::string data_for_images(const PredictFlags& f, const std::string& checkpoint_path) {
  if (!f.data.empty()) return f.data;
  const nlohmann::json config =
      nlohmann::json::parse(read_checkpoint(checkpoint_path).meta.config_json, nullptr, false);
  const std::string trained_on =
      config.is_object() && config.contains("data") && config["data"].is_string()
          ? config["data"].get<std::string>()
          : std::string();
  std::error_code ec;
  RT_CHECK(!trained_on.empty() && std::filesystem::is_regular_file(trained_on, ec),
           "--images without --data: checkpoint {} has no record of its training data's image "
           "size and class names (it predates them), and was trained on '{}', which is not a "
           "file here; pass --data with that data set",
           checkpoint_path, trained_on);
  log0(
      "--images: image size and class names from {}, the checkpoint's training data "
      "(a checkpoint written before it kept a record of them)",
      trained_on);
  return trained_on;
}

// The split's rows: index, predicted class, its probability, the label (empty
// without labels); the class names where the set has them; --logits. Returns
// the row count.
std::uint64_t predict_split(const PredictFlags& f, Dataset& data, Model& model, Device device,
                            std::ofstream& out) {
  const std::vector<std::string>& names = data.class_names();
  const auto nc = static_cast<std::size_t>(data.num_classes());
  // Names are extra columns after the first four, which keep their meaning.
  out << "index,predicted,probability,label" << (names.empty() ? "" : ",predicted_name,label_name");
  write_logit_header(out, f.logits, nc);
  EvalBatches batches(data, eval_shard(data.size(), 0, 1), f.batch, 2, device);
  std::vector<float> logits;
  std::vector<std::int32_t> labels;
  std::uint64_t index = 0;
  while (auto b = batches.next()) {
    model.forward(b->x.as<const float>(), b->y.as<const std::int32_t>(), b->size,
                  /*training=*/false);
    model.synchronize();
    logits.resize(b->size * nc);
    labels.resize(b->size);
    model.copy_logits(0, logits.data(), logits.size());
    copy_view(view_of(labels.data(), labels.size()), b->y.slice(0, b->size));
    for (std::size_t i = 0; i < b->size; ++i, ++index) {
      const float* row = logits.data() + i * nc;
      const auto [best, p] = top1(row, nc);
      out << index << ',' << best << ',' << fmt::format("{:.6f}", p) << ',';
      if (data.has_labels()) out << labels[i];  // else the label column stays empty
      if (!names.empty())
        out << ',' << names[best] << ','
            << (data.has_labels() ? names[static_cast<std::size_t>(labels[i])] : std::string());
      if (f.logits) write_logits(out, row, nc);
      out << '\n';
    }
  }
  return index;
}

int run_predict(const PredictFlags& f, const Topology& topo) {
  RT_CHECK(topo.world_size() == 1,
           "predict runs on one rank (it writes one file); start it without mpirun or with -np 1, "
           "not {}",
           topo.world_size());
  RT_CHECK(!f.data.empty() || !f.images.empty(),
           "--data is required: the data set whose --split to predict (or --images FILE|FOLDER... "
           "for new images)");
  std::string path = f.ckpt;
  // The newest checkpoint that reads (a damaged newest file is skipped with a
  // warning, as `train --resume latest` does).
  if (std::filesystem::is_directory(path)) path = newest_intact_checkpoint_path(path, "--ckpt");
  // --images without --data: the checkpoint's own record when it has one.
  std::optional<ImageInput> input;
  if (!f.images.empty() && f.data.empty()) input = recorded_image_input(f, path);
  const std::string data_path =
      f.images.empty() ? f.data : (input ? std::string() : data_for_images(f, path));
  guard_output(f.out, {{"--data", data_path}, {"--ckpt", f.ckpt}}, f.force, "-o");
  const std::vector<std::string> images =
      f.images.empty() ? std::vector<std::string>() : image_paths(f.images);
  std::unique_ptr<Communicator> control = make_control_communicator(topo);
  std::optional<Dataset> data;
  if (!input) {
    // Predictions need no labels: data nobody has labelled is what they are for.
    data.emplace(
        Dataset::open_on_all_ranks(data_path, f.split, *control, Dataset::Labels::optional));
    RT_CHECK(!data->is_tokens(),
             "{} holds tokens: predict writes per-sample class predictions; for a language model "
             "use 'ringtrain eval' (loss, perplexity) or 'ringtrain generate'",
             data->describe());
    const std::string spec = use_eval_transform(*data, f.eval_transform, path, f.loader_threads);
    if (!f.images.empty()) {
      input = image_input_of(*data);
      // The data set keeps the transform it was given; the same spec, parsed again.
      if (!spec.empty()) input->transform = SampleTransform::parse(spec, 0, "--eval-transform");
    }
  }
  ModelOptions options;
  options.device = topo.device();
  options.max_batch = f.batch;
  options.precision = parse_precision(f.precision);
  options.layout = parse_layout_choice(f.layout);
  CheckpointModel cm =
      input ? load_checkpoint_model(path, *control, input->sample_shape(), input->classes, options)
            : load_checkpoint_model(path, *control, data->sample_shape(), data->num_classes(),
                                    options);
  Model& model = *cm.model;

  // A temporary name, renamed at the end: an interrupted run leaves no
  // half-written file under the name asked for, and a failed one (a bad
  // image, a full disk) removes it (TempFileGuard: on a signal).
  const std::string tmp = fmt::format("{}.tmp-{}", f.out, static_cast<long>(::getpid()));
  TempFileGuard interrupted(tmp);
  std::ofstream out(tmp);
  RT_CHECK(out.good(), "-o {}: cannot open {} for writing: {}", f.out, tmp, std::strerror(errno));
  std::uint64_t index = 0;
  try {
    if (f.images.empty()) {
      index = predict_split(f, *data, model, topo.device(), out);
    } else {
      predict_folder(f, images, *input, model, topo.device(), out);
      index = images.size();
    }
    out.close();
    RT_CHECK(static_cast<bool>(out), "-o {}: write failed: {}", f.out, std::strerror(errno));
    std::error_code ec;
    std::filesystem::rename(tmp, f.out, ec);
    RT_CHECK(!ec, "-o {}: cannot rename {} to it: {}", f.out, tmp, ec.message());
  } catch (...) {
    out.close();
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw;
  }
  if (!f.images.empty())
    log0("wrote {} predictions of {} (step {}) for the images of {} to {}", index, path,
         cm.meta.step, fmt::join(f.images, ", "), f.out);
  else
    log0("wrote {} predictions of {} (step {}) on {}{} to {}", index, path, cm.meta.step,
         data->describe(), data->has_labels() ? "" : " (no labels: the label column is empty)",
         f.out);
  return 0;
}

CLI::App* add_predict_command(CLI::App& app, CommandContext& ctx) {
  auto f = std::make_shared<PredictFlags>();
  CLI::App* sub = app.add_subcommand("predict",
                                     "Write per-sample predictions of a checkpoint as CSV "
                                     "(index, predicted, probability, label; data without "
                                     "labels leaves the label column empty), on a split or on "
                                     "a folder of images (--images)");
  sub->add_option("--ckpt", f->ckpt, "Checkpoint file, or a directory (its newest checkpoint)")
      ->required();
  sub->add_option("--data", f->data,
                  "HDF5 dataset file (with --images: optional; the checkpoint's record of its "
                  "training data gives the image size and class names)")
      ->check(CLI::ExistingFile);
  sub->add_option("--split", f->split, "Split to predict")->capture_default_str();
  sub->add_option("-o,--out", f->out, "CSV file to write")->required();
  sub->add_flag("--force", f->force, "Replace an existing -o file");
  sub->add_flag("--logits", f->logits,
                "Also write each sample's logits (columns logit_0 ... logit_<classes-1>)");
  sub->add_option("--batch", f->batch, "Samples per forward pass")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  sub->add_option("--plugin", f->plugins,
                  "Shared library of layer types the checkpoint's model uses (repeatable)");
  sub->add_option("--images", f->images,
                  "Predict these images, files or folders (every .jpg/.jpeg/.png under a folder; "
                  "no labels needed) instead of a split: --data, else the checkpoint itself "
                  "(or, for an older one, its training data file) gives the stored "
                  "size and class names; columns path, predicted, probability, predicted_name, "
                  "and with --logits the logits");
  sub->add_option("--fit", f->fit, "With --images: crop, pad or stretch, as at conversion")
      ->check(CLI::IsMember({"crop", "pad", "stretch"}))
      ->capture_default_str();
  add_precision_option(sub, f->precision);
  add_layout_option(sub, f->layout);
  sub->add_option("--eval-transform", f->eval_transform,
                  "Transform of the inputs (default: the one the checkpoint's training run used)");
  sub->add_option("--loader-threads", f->loader_threads, "Decode/transform threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  add_device_options(sub, ctx, "cpu");
  sub->parse_complete_callback([f, &ctx] {
    load_layer_plugins(f->plugins);
    ctx.action = [f](const Topology& topo) { return run_predict(*f, topo); };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "predict", 30, ringtrain::apps::add_predict_command)
