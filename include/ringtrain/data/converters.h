// Converters into the ringtrain HDF5 dataset format (dataset.h): from IDX
// (MNIST, Fashion-MNIST), from CSV, and a synthetic learnable set. Each first
// refuses an output that is an input or, without `force`, exists
// (output_guard.h), then writes through DatasetWriter (temporary name, then
// rename) and reports progress on stderr for large inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringtrain {

// Debian's dataset-fashion-mnist package.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
const std::vector<std::string>& fashion_mnist_class_names();

struct ConvertSummary {
  std::string text;  // one line per split, for the command to print
};

struct IdxConvertOptions {
  std::string train_images, train_labels, test_images, test_labels;
  std::string output;
  // auto (Fashion-MNIST names when an input path says "fashion", digits for
  // "mnist"), none, fashion-mnist, mnist, or a comma-separated list.
  std::string class_names = "auto";
  int num_classes = 0;             // 0: from class_names, else max label + 1
  std::string normalize = "unit";  // unit: byte/255; standard: (byte/255 - mean)/std of train
  bool force = false;              // replace an existing output (never an input)
};
ConvertSummary convert_idx(const IdxConvertOptions& o);

struct CsvConvertOptions {
  std::string train, test;  // test optional: else --test-fraction of train, held out
  std::string output;
  std::string label_column = "0";  // a header name or a 0-based index
  std::string header = "auto";     // auto, yes, no
  char delimiter = ',';
  double test_fraction = 0.1;  // used only without a test file
  std::uint64_t seed = 0;      // shuffles rows before the holdout
  int num_classes = 0;         // 0: max label + 1
  std::vector<std::string> class_names;
  bool force = false;  // replace an existing output (never an input)
};
ConvertSummary convert_csv(const CsvConvertOptions& o);

struct ImageConvertOptions {
  std::string train;  // a folder of class folders (ImageFolder convention)
  std::string test;   // optional: else --test-fraction of each class, held out
  std::string output;
  double test_fraction = 0.1;  // used only without a test folder
  std::uint64_t seed = 0;      // picks the held-out files
  int channels = 0;            // 1 or 3; 0: 3 if any image has colour, else 1
  int height = 0, width = 0;   // 0: every image must have the size of the first
  std::string fit = "crop";    // crop (resize to cover, center crop), pad, stretch
  int workers = 0;             // decoding threads; 0: the cores
  bool skip_bad = false;       // skip (and count) unreadable images instead of failing
  bool force = false;          // write over an existing output
  bool progress = true;        // a line on stderr at most once a second
  // raw: uint8 (C, H, W) samples; jpeg: JPEG byte strings, decoded on the
  // loader threads (the original file where it can be, else re-encoded at
  // `quality`; without a size, images keep their own sizes).
  std::string store = "raw";
  int quality = 90;
  // --store jpeg without a fixed size: shrink images whose short side is above
  // short_side (or long side above max_side) to fit both, never enlarging.
  int short_side = 0, max_side = 0;
};
// Reads, decodes and resizes in bounded slabs, so memory does not grow with
// the number of images; scale 1/255.
ConvertSummary convert_images(const ImageConvertOptions& o);

struct SyntheticOptions {
  std::string output;
  std::size_t n = 0;       // train samples
  std::size_t test_n = 0;  // test samples
  std::vector<std::size_t> shape;
  int classes = 10;
  std::uint64_t seed = 0;
  std::string dtype = "f32";  // f32 or u8
  double noise = 0.5;         // std of the noise around each class prototype
  bool force = false;         // replace an existing output
};
// Sample i of class c is prototype_c + noise * N(0, 1) per element, where the
// prototypes are uniform in [0, 1]^D: learnable by a linear model, never
// trivially separable when noise is large, and a pure function of the seed.
ConvertSummary make_synthetic(const SyntheticOptions& o);

struct TextConvertOptions {
  std::vector<std::string> files;  // read in order, as one stream
  std::string output;
  // bytes, sentencepiece:MODEL (an existing .model), or sentencepiece with
  // train_vocab > 0 (a model trained on the files).
  std::string tokenizer = "bytes";
  std::size_t train_vocab = 0;         // --train-tokenizer
  std::string tokenizer_type = "bpe";  // bpe or unigram, for --train-tokenizer
  double test_fraction = 0.1;          // the stream's last tokens, held out as /test
  bool force = false;                  // replace an existing output (never an input)
};
// A token dataset (ringtrain/data/token_data.h): the files' tokens in order,
// the last test_fraction of each file's as /test, the rest as /train, the
// tokenizer recorded.
ConvertSummary convert_text(const TextConvertOptions& o);

}  // namespace ringtrain
