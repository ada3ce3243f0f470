// Named-tensor checkpoints (tensor_checkpoint.h) over the trainer's atomic
// checkpoint writer and checked reader.
#include "ringtrain/train/tensor_checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "ringtrain/core/check.h"
#include "ringtrain/train/checkpoint.h"

namespace ringtrain {

namespace {

std::size_t product(const std::vector<std::size_t>& shape) {
  std::size_t n = 1;
  for (std::size_t d : shape) n *= d;
  return n;
}

std::uint64_t tag_hash(const std::string& tag) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const unsigned char c : tag) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace

std::string save_tensor_checkpoint(int rank, const std::string& dir,
                                   const TrainingPosition& position,
                                   const std::vector<NamedTensor>& tensors, const std::string& tag,
                                   std::size_t keep) {
  const std::string path =
      (std::filesystem::path(dir) / checkpoint_file_name(position.step)).string();
  if (rank != 0) return path;
  CheckpointMeta meta;
  meta.step = position.step;
  meta.epoch = position.cursor.epoch;
  meta.epoch_step = position.cursor.step;
  meta.global_batch = position.global_batch;
  meta.model_spec = tag;
  meta.model_hash = tag_hash(tag);
  meta.config_json = "{}";
  meta.rng_state = {0};
  std::vector<TensorRecord> records;
  for (const NamedTensor& t : tensors)
    records.push_back({t.name, t.shape, t.data, product(t.shape)});
  return write_checkpoint_atomic(dir, meta, records, {}, keep);
}

std::optional<TrainingPosition> load_tensor_checkpoint(const std::string& path_or_dir,
                                                       const std::vector<NamedTensor>& tensors,
                                                       std::uint64_t global_batch,
                                                       const std::string& tag) {
  std::string path = path_or_dir;
  if (std::filesystem::is_directory(path_or_dir)) {
    const auto latest = latest_checkpoint(path_or_dir);
    if (!latest) return std::nullopt;
    path = *latest;
  }
  CheckpointExpectation expected;
  expected.model_hash = tag_hash(tag);
  expected.model_spec = tag;
  for (const NamedTensor& t : tensors) expected.params.push_back({t.name, t.shape});
  const LoadedCheckpoint loaded = read_checkpoint(path, expected);
  for (std::size_t i = 0; i < tensors.size(); ++i)
    std::copy(loaded.params[i].second.begin(), loaded.params[i].second.end(), tensors[i].data);
  TrainingPosition position;
  position.step = loaded.meta.step;
  position.global_batch = global_batch;
  const DataCursor saved{loaded.meta.epoch, loaded.meta.epoch_step};
  position.cursor = ShardedSampler::convert_cursor(saved, loaded.meta.global_batch, global_batch);
  return position;
}

}  // namespace ringtrain
