// One split (/train, /test, /val) of a ringtrain HDF5 dataset file:
//   /<split>/x   N x sample shape, uint8 or float32, chunked along N
//                or N variable-length byte strings, one JPEG each (attributes
//                encoding = jpeg, channels, height, width; 0 x 0: sizes vary),
//                decoded by read() on the loader threads
//   /<split>/y   N labels, int32 or int64, each in [0, num_classes)
//   or /<split>/tokens, a flat array of token ids (ringtrain/data/token_data.h),
//   whose samples are windows once set_token_context gives their length
//   attributes on /<split> (or, as a fallback, on the file root):
//     num_classes (integer), class_names (strings, optional),
//     scale and offset (float, required for uint8 x: value = byte * scale + offset)
// A rank reads only the samples it asks for, by hyperslab. Labels are small and
// validated at open, so they are held in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ringtrain {

class Communicator;
class SampleTransform;

enum class SampleDType { u8, f32 };
const char* sample_dtype_name(SampleDType t);

class Dataset {
 public:
  // Throws Error naming the file, split and dataset for every bad-input case:
  // missing file, split or dataset; truncated or corrupt file; unsupported
  // dtype; x and y lengths that differ; a label outside [0, num_classes).
  // Labels are required unless `labels` is Labels::optional (predict reads
  // data nobody has labelled); a split without y then reads as has_labels()
  // false, with every label 0 so that a forward pass may still take them.
  // Labels::inspect (data check) is optional's leniency plus this: a label
  // outside [0, num_classes) is recorded in out_of_range_labels() and read as
  // 0, instead of refusing the split at the first one.
  enum class Labels { required, optional, inspect };
  static Dataset open(const std::string& path, const std::string& split,
                      Labels labels = Labels::required);
  // The names of the splits (top-level groups) in a dataset file.
  static std::vector<std::string> splits(const std::string& path);
  // The same, collectively over `control` (the control channel): every rank
  // opens, and if any rank fails, every rank throws (its own message, or one
  // naming the rank that failed), so that every rank reports and none waits in
  // a collective; a rank that never opens ends the others' wait after the
  // communicator's timeout.
  static Dataset open_on_all_ranks(const std::string& path, const std::string& split,
                                   Communicator& control, Labels labels = Labels::required);

  Dataset(Dataset&&) noexcept;
  Dataset& operator=(Dataset&&) noexcept;
  ~Dataset();

  std::size_t size() const;
  // What read() gives per sample: the stored shape, or the transform's output.
  const std::vector<std::size_t>& sample_shape() const;  // e.g. {1,28,28} or {F}
  std::size_t sample_elements() const;
  const std::vector<std::size_t>& stored_shape() const;  // x's shape per sample in the file
  SampleDType stored_dtype() const;
  float scale() const;   // 1 for float32 data
  float offset() const;  // 0 for float32 data
  int num_classes() const;
  const std::vector<std::string>& class_names() const;  // empty when the file has none
  const std::string& path() const;
  const std::string& split() const;
  // "fashion.h5:/train" for messages.
  std::string describe() const;

  // Token data (ringtrain/data/token_data.h): a split of `tokens` instead of
  // x and y. set_token_context makes its samples windows of `context` tokens
  // (shape {context}, token ids as floats) with `context` int32 labels each
  // (the next tokens); keep_partial keeps the last, shorter window, padded
  // with kIgnoreLabel (evaluation: every token is a target once). Until then
  // size() is 0. num_classes() is the vocabulary size.
  bool is_tokens() const;
  void set_token_context(std::size_t context, bool keep_partial);
  // Labels per sample: the context for token data, else 1.
  std::size_t labels_per_sample() const;
  std::uint64_t token_count() const;     // 0 for sample data
  const std::string& tokenizer() const;  // "bytes", "sentencepiece"; empty for sample data
  std::vector<std::int32_t> read_tokens(std::uint64_t begin, std::uint64_t end);

  // Throws Error naming both shapes (and the file and split) when they differ.
  void check_sample_shape(const std::vector<std::size_t>& expected) const;

  // Reads these samples (any order, repeats allowed) as normalised float32 into
  // x (indices.size() * sample_elements()) and int32 labels into y (may be
  // null; indices.size() * labels_per_sample()).
  // Contiguous runs of the sorted indices become one hyperslab each, read in
  // one H5Dread; the requested order is restored while converting. With a
  // transform, `epoch` and each sample's index seed its random choices.
  void read(std::span<const std::uint64_t> indices, float* x, std::int32_t* y,
            std::uint64_t epoch = 0);

  // uint8 data (raw or encoded images): read_bytes() gives what read() gives
  // before its last step, the widening to float (the transform's geometry
  // included: sample_elements() bytes per sample), and byte_widening() that
  // step: read()'s x[c-th plane][i] = byte * scale[c] + offset[c]. A GPU rank's
  // loader ships the bytes and widens them on the device.
  struct ByteWidening {
    std::size_t plane = 1;             // elements per channel plane of a sample
    std::vector<float> scale, offset;  // one per channel
  };
  bool reads_bytes() const;
  void read_bytes(std::span<const std::uint64_t> indices, std::uint8_t* x, std::int32_t* y,
                  std::uint64_t epoch = 0);
  ByteWidening byte_widening() const;

  // --augment / --eval-transform: read() applies `transform` to every sample
  // (uint8 C x H x W images only; Error naming the file otherwise), on
  // `threads` loader threads (the caller's included). Null removes it.
  void set_transform(std::shared_ptr<const SampleTransform> transform, std::size_t threads = 1);
  const SampleTransform* transform() const;
  // The stored bytes of samples [begin, end), unconverted (for round-trip checks
  // and tools): (end - begin) * sample_elements() elements of stored_dtype().
  void read_stored(std::uint64_t begin, std::uint64_t end, void* out);
  const std::vector<std::int32_t>& labels() const;
  // False for a split without y opened with Labels::optional.
  bool has_labels() const;
  // Labels::inspect: how many labels lie outside [0, num_classes), and the
  // first kMaxOutOfRangeListed of them as (sample index, stored value).
  static constexpr std::size_t kMaxOutOfRangeListed = 20;
  struct OutOfRangeLabels {
    std::uint64_t count = 0;
    std::vector<std::pair<std::uint64_t, long long>> first;
  };
  const OutOfRangeLabels& out_of_range_labels() const;
  // Whether read() takes samples straight from their file offsets (unfiltered
  // x in whole-sample chunks or contiguous, host byte order), or reads by
  // hyperslab through HDF5. use_hdf5_reads() forces the latter (tests, comparisons).
  bool direct_reads() const;
  void use_hdf5_reads();

  // --cache (call before starting a Prefetcher on this dataset): holds the whole split (this rank's
  // working set over epochs, since every epoch permutes all of it) in memory in its stored dtype,
  // when it fits in `budget_bytes` (0: half of the memory available now, shared by the ranks on
  // this node). Returns whether the cache is on; logs why when it is not.
  bool enable_cache(std::size_t budget_bytes = 0, int ranks_on_node = 1);
  bool cached() const;
  std::size_t stored_bytes() const;  // size of x as stored

 public:
  struct Impl;  // defined in src/data/dataset.cpp

 private:
  explicit Dataset(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "1x28x28"
std::string shape_string(const std::vector<std::size_t>& shape);
// "1,28,28" or "1x28x28" -> {1,28,28}; throws Error naming `what` on bad text.
std::vector<std::size_t> parse_shape(const std::string& text, const std::string& what);

}  // namespace ringtrain
