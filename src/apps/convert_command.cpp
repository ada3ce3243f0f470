// `ringtrain convert idx|csv|synthetic|images`: make a ringtrain HDF5 dataset. Runs on
// rank 0 (under mpirun the other ranks have nothing to do); progress goes to
// stderr for large inputs, a summary to stdout.
#include <cstdio>
#include <memory>

#include "apps/command.h"
#include "ringtrain/data/converters.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/tokenizer.h"

namespace ringtrain::apps {
namespace {

int finish(const Topology& topo, const std::string& output,
           const std::function<ConvertSummary()>& run) {
  if (topo.rank() != 0) return 0;
  const ConvertSummary s = run();
  std::printf("wrote %s\n%s", output.c_str(), s.text.c_str());
  std::fflush(stdout);
  return 0;
}

void add_force_flag(CLI::App* sub, bool& force) {
  sub->add_flag("--force", force,
                "Replace an existing output file (an output that is one of the inputs is refused "
                "even so)");
}

CLI::App* add_convert(CLI::App& app, CommandContext& ctx) {
  CLI::App* sub = app.add_subcommand("convert",
                                     "Convert IDX (MNIST, Fashion-MNIST), CSV, image folders, text "
                                     "or synthetic data to ringtrain's HDF5 dataset format");
  sub->require_subcommand(1);
  // Conversion needs no GPU: take none, even where one is visible.
  sub->parse_complete_callback([&ctx] { ctx.topology.device = DeviceRequest::cpu; });
  return sub;
}

CLI::App* add_convert_idx(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<IdxConvertOptions>();
  const std::string dir = kFashionMnistDir;
  o->train_images = dir + "/train-images-idx3-ubyte.gz";
  o->train_labels = dir + "/train-labels-idx1-ubyte.gz";
  o->test_images = dir + "/t10k-images-idx3-ubyte.gz";
  o->test_labels = dir + "/t10k-labels-idx1-ubyte.gz";
  o->output = "fashion.h5";
  CLI::App* sub =
      parent.add_subcommand("idx",
                            "IDX image + label files, gzipped or not (defaults: Debian's "
                            "Fashion-MNIST in " +
                                dir + ")");
  sub->add_option("--train-images", o->train_images, "Training images (IDX, ubyte or float)")
      ->capture_default_str();
  sub->add_option("--train-labels", o->train_labels, "Training labels (IDX)")
      ->capture_default_str();
  sub->add_option("--test-images", o->test_images, "Test images (IDX)")->capture_default_str();
  sub->add_option("--test-labels", o->test_labels, "Test labels (IDX)")->capture_default_str();
  sub->add_option("-o,--output", o->output, "Output HDF5 file")->capture_default_str();
  add_force_flag(sub, o->force);
  sub->add_option(
         "--class-names", o->class_names,
         "auto (Fashion-MNIST names when a path says 'fashion', digits for 'mnist'), none, "
         "fashion-mnist, mnist, or a comma-separated list")
      ->capture_default_str();
  sub->add_option("--classes", o->num_classes,
                  "Number of classes (0: from the class names, else max label + 1)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option(
         "--normalize", o->normalize,
         "unit: pixel/255; standard: (pixel/255 - mean) / std of the training set (stored as the "
         "scale and offset attributes; the bytes stay as they are)")
      ->check(CLI::IsMember({"unit", "standard"}))
      ->capture_default_str();
  sub->parse_complete_callback([&ctx, o] {
    ctx.action = [o](const Topology& t) {
      return finish(t, o->output, [o] { return convert_idx(*o); });
    };
  });
  return sub;
}

CLI::App* add_convert_csv(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<CsvConvertOptions>();
  auto delimiter = std::make_shared<std::string>(",");
  auto names = std::make_shared<std::string>();
  CLI::App* sub = parent.add_subcommand(
      "csv",
      "CSV rows of a label column (class numbers, or class names) plus numeric feature columns "
      "(float32)");
  sub->add_option("--train", o->train, "Training CSV file")->required();
  sub->add_option("--test", o->test,
                  "Test CSV file (default: hold out --test-fraction of --train)");
  sub->add_option("-o,--output", o->output, "Output HDF5 file")->required();
  add_force_flag(sub, o->force);
  sub->add_option(
         "--label-column", o->label_column,
         "Label column: a header name, a 0-based index, or none (data nobody has labelled, for "
         "'ringtrain predict'; give --classes)")
      ->capture_default_str();
  sub->add_option("--header", o->header, "Whether the first row is a header: auto, yes, no")
      ->check(CLI::IsMember({"auto", "yes", "no"}))
      ->capture_default_str();
  sub->add_option("--delimiter", *delimiter, "Field separator (one character)")
      ->capture_default_str();
  sub->add_option("--test-fraction", o->test_fraction,
                  "Fraction of --train held out as /test when no --test")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the shuffle before the holdout")
      ->capture_default_str();
  sub->add_option("--classes", o->num_classes, "Number of classes (0: max label + 1)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("--class-names", *names,
                  "Comma-separated class names (optional). Labels that are names map to classes "
                  "in this order; without it, in sorted order");
  sub->parse_complete_callback([&ctx, o, delimiter, names] {
    if (delimiter->size() != 1)
      throw CLI::ValidationError("--delimiter",
                                 "must be exactly one character, got '" + *delimiter + "'");
    o->delimiter = (*delimiter)[0];
    if (!names->empty()) {
      std::size_t pos = 0;
      while (pos <= names->size()) {
        const std::size_t end = std::min(names->find(',', pos), names->size());
        o->class_names.push_back(names->substr(pos, end - pos));
        pos = end + 1;
      }
    }
    ctx.action = [o](const Topology& t) {
      return finish(t, o->output, [o] { return convert_csv(*o); });
    };
  });
  return sub;
}

CLI::App* add_convert_synthetic(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<SyntheticOptions>();
  auto shape = std::make_shared<std::string>("1,28,28");
  o->n = 60000;
  o->output = "synthetic.h5";
  auto test_n = std::make_shared<std::size_t>(0);
  CLI::App* sub = parent.add_subcommand(
      "synthetic",
      "A reproducible, learnable classification set: class prototypes plus Gaussian noise");
  sub->add_option("--n", o->n, "Training samples")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--test-n", *test_n, "Test samples (default: n/6, at least 1)");
  sub->add_option("--shape", *shape, "Sample shape, e.g. 1,28,28 (C,H,W) or 20 (features)")
      ->capture_default_str();
  sub->add_option("--classes", o->classes, "Number of classes (>= 2)")
      ->check(CLI::Range(2, 1 << 20))
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed: the same seed gives the same file")
      ->capture_default_str();
  sub->add_option("--dtype", o->dtype, "Stored dtype: f32, or u8 (with scale 1/255)")
      ->check(CLI::IsMember({"f32", "u8"}))
      ->capture_default_str();
  sub->add_option("--noise", o->noise,
                  "Standard deviation of the noise around each class prototype")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  sub->add_option("-o,--output", o->output, "Output HDF5 file")->capture_default_str();
  add_force_flag(sub, o->force);
  sub->parse_complete_callback([&ctx, o, shape, test_n] {
    o->shape = parse_shape(*shape, "--shape");
    o->test_n = *test_n > 0 ? *test_n : std::max<std::size_t>(1, o->n / 6);
    ctx.action = [o](const Topology& t) {
      return finish(t, o->output, [o] { return make_synthetic(*o); });
    };
  });
  return sub;
}

CLI::App* add_convert_images(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<ImageConvertOptions>();
  auto size = std::make_shared<std::string>();
  CLI::App* sub = parent.add_subcommand(
      "images",
      "Folders of JPEG/PNG images, one subfolder per class (torchvision's ImageFolder layout), "
      "to uint8 C x H x W samples");
  CLI::Option* train = sub->add_option("--train", o->train, "Training folder: DIR/<class>/<image>");
  // `convert images DIR -o FILE` is what a new user types first.
  sub->add_option("train_dir", o->train, "The training folder, as --train")->excludes(train);
  sub->add_option("--test", o->test,
                  "Test folder with the same class folders (default: hold out --test-fraction "
                  "of each training class)");
  sub->add_option("-o,--output", o->output, "Output HDF5 file")->required();
  sub->add_option("--test-fraction", o->test_fraction,
                  "Fraction of each class held out as /test when there is no --test")
      ->check(CLI::Range(0.0, 1.0))
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Seed of the holdout choice")->capture_default_str();
  sub->add_option("--channels", o->channels,
                  "1 (gray) or 3 (RGB); default: 3 if any image has colour, else 1")
      ->check(CLI::IsMember({1, 3}));
  sub->add_option("--size", *size,
                  "H,W of every sample, or S for S,S (default: the images' own size, which must "
                  "then be the same for all)");
  sub->add_option("--fit", o->fit,
                  "With --size: crop (resize to cover, then center crop: keeps the aspect ratio), "
                  "pad (resize to fit, black borders) or stretch")
      ->check(CLI::IsMember({"crop", "pad", "stretch"}))
      ->capture_default_str();
  sub->add_option("--store", o->store,
                  "raw: uint8 C x H x W samples (fast to load); jpeg: JPEG bytes decoded on the "
                  "loader threads (smaller; the original files where possible, images of "
                  "their own sizes without --size)")
      ->check(CLI::IsMember({"raw", "jpeg"}))
      ->capture_default_str();
  sub->add_option("--short-side", o->short_side,
                  "With --store jpeg and no --size: shrink images so the short side is at most S "
                  "(never enlarged)")
      ->check(CLI::Range(1, 65535));
  sub->add_option("--max-side", o->max_side,
                  "With --store jpeg and no --size: shrink images so the long side is at most M")
      ->check(CLI::Range(1, 65535));
  sub->add_option("--quality", o->quality, "JPEG quality of re-encoded images (--store jpeg)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  sub->add_option("--workers", o->workers, "Decoding threads (default: the cores)")
      ->check(CLI::NonNegativeNumber);
  sub->add_flag("--skip-bad", o->skip_bad,
                "Skip unreadable images (named on stderr, counted in the summary) instead of "
                "stopping at the first");
  sub->add_flag("--force", o->force, "Write over an existing output file");
  sub->add_flag(
      "--no-progress", [o](std::int64_t) { o->progress = false; }, "No progress line on stderr");
  sub->parse_complete_callback([&ctx, o, size] {
    if (o->train.empty())
      throw CLI::RequiredError("--train DIR (a folder with one subfolder of images per class)");
    if (!size->empty()) {
      std::vector<std::size_t> hw = parse_shape(*size, "--size");
      // One number is a square, as torchvision's Resize((S, S)) and timm's img_size.
      if (hw.size() == 1) hw.push_back(hw[0]);
      if (hw.size() != 2 || hw[0] > 65535 || hw[1] > 65535)
        throw CLI::ValidationError("--size",
                                   "expected H,W or S (e.g. 64,64 or 64), got '" + *size + "'");
      o->height = static_cast<int>(hw[0]);
      o->width = static_cast<int>(hw[1]);
    }
    ctx.action = [o](const Topology& t) {
      return finish(t, o->output, [o] { return convert_images(*o); });
    };
  });
  return sub;
}

CLI::App* add_convert_text(CLI::App& parent, CommandContext& ctx) {
  auto o = std::make_shared<TextConvertOptions>();
  CLI::App* sub = parent.add_subcommand(
      "text", "Text files to a token dataset for language models (/train and /test token streams)");
  sub->add_option("files", o->files, "Text files, read in order as one stream")->required();
  sub->add_option("-o,--output", o->output, "Output HDF5 file")->required();
  sub->add_option("--tokenizer", o->tokenizer,
                  std::string("bytes (each byte a token, vocabulary 256; any file), "
                              "sentencepiece:MODEL (an existing SentencePiece .model), or "
                              "sentencepiece with --train-tokenizer VOCAB") +
                      (sentencepiece_available() ? ""
                                                 : " [this build has no sentencepiece: bytes "
                                                   "only]"))
      ->capture_default_str();
  sub->add_option("--train-tokenizer", o->train_vocab,
                  "Train a SentencePiece model of this vocabulary size on the files (with "
                  "--tokenizer sentencepiece); the model is stored in the dataset")
      ->check(CLI::Range(8, 1 << 24));
  sub->add_option("--tokenizer-type", o->tokenizer_type,
                  "Model type for --train-tokenizer: bpe or unigram")
      ->check(CLI::IsMember({"bpe", "unigram"}))
      ->capture_default_str();
  sub->add_option("--test-fraction", o->test_fraction,
                  "Fraction of each file's tokens, from its end, held out as /test")
      ->check(CLI::Range(0.0, 0.99))
      ->capture_default_str();
  add_force_flag(sub, o->force);
  sub->parse_complete_callback([&ctx, o] {
    ctx.action = [o](const Topology& t) {
      return finish(t, o->output, [o] { return convert_text(*o); });
    };
  });
  return sub;
}

}  // namespace
}  // namespace ringtrain::apps

RINGTRAIN_REGISTER_COMMAND("", "convert", 30, ringtrain::apps::add_convert)
RINGTRAIN_REGISTER_COMMAND("convert", "idx", 10, ringtrain::apps::add_convert_idx)
RINGTRAIN_REGISTER_COMMAND("convert", "csv", 20, ringtrain::apps::add_convert_csv)
RINGTRAIN_REGISTER_COMMAND("convert", "synthetic", 30, ringtrain::apps::add_convert_synthetic)
RINGTRAIN_REGISTER_COMMAND("convert", "images", 25, ringtrain::apps::add_convert_images)
RINGTRAIN_REGISTER_COMMAND("convert", "text", 40, ringtrain::apps::add_convert_text)
