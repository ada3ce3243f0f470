// Training checkpoints: one HDF5 file per saved step, `ckpt-<step>.h5`.
//
//   /                      attributes: format_version, step, epoch, epoch_step,
//                          global_batch, world_size, rng_state (uint64[]),
//                          model_spec, model_hash, config (JSON), finished,
//                          writer (ringtrain version)
//   /params/<name>         one float32 dataset per parameter tensor, named by
//                          layer ("conv1.weight") and shaped like the tensor
//   /optimizer/<name>      one float32 dataset per optimizer state buffer
//   /buffers/<name>        the model's non-trainable state ("bn1.running_mean"),
//                          only for models that have some
//
// Datasets keep their creation order (the model's parameter order) and carry a
// Fletcher-32 checksum, so a flipped bit in a tensor is a read error rather
// than a silently different model.
//
// Only rank 0 writes. The file is written under a temporary name in the same
// directory, fsynced, renamed into place and the directory fsynced, so a crash
// at any point leaves either the old set of checkpoints or the new one: never a
// half-written `ckpt-<step>.h5`. Readers only ever look at renamed files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ringtrain {

// Bumped whenever the layout above changes incompatibly; the reader refuses
// other versions with a message naming both.
inline constexpr std::uint32_t kCheckpointFormatVersion = 1;

// A host tensor to be written: `count` floats at `data`, with `shape` whose
// product is `count` (an empty shape is a scalar, count 1).
struct TensorRecord {
  std::string name;
  std::vector<std::size_t> shape;
  const float* data = nullptr;
  std::size_t count = 0;
};

struct CheckpointMeta {
  std::uint64_t step = 0;          // optimizer steps completed
  std::uint64_t epoch = 0;         // data cursor: the epoch the next step reads from
  std::uint64_t epoch_step = 0;    // ... and the global step within that epoch
  std::uint64_t global_batch = 0;  // batch x world x accumulation of the writing run
  int world_size = 0;
  std::vector<std::uint64_t> rng_state;
  std::string model_spec;
  std::uint64_t model_hash = 0;
  std::string config_json;  // the full run configuration, for humans and tools
  bool finished = false;    // written at the normal end of training
};

// Writes `dir`/ckpt-<meta.step>.h5 atomically (creating `dir` if needed), then
// deletes any temporaries left by a writer that crashed and all but the newest
// `keep` checkpoints of steps up to meta.step (keep == 0 keeps all). Those of
// later steps (another run's) are kept and a warning names them: the trainer
// should refuse a fresh run in a directory that has checkpoints (see
// list_checkpoints). Returns the final path. Throws
// Error (naming the file) on invalid records or any I/O failure; the temporary
// is removed and existing checkpoints are untouched in that case.
std::string write_checkpoint_atomic(const std::string& dir, const CheckpointMeta& meta,
                                    const std::vector<TensorRecord>& params,
                                    const std::vector<TensorRecord>& optimizer_state,
                                    std::size_t keep,
                                    const std::vector<TensorRecord>& buffers = {});

struct LoadedCheckpoint {
  CheckpointMeta meta;
  // In the order they were written.
  std::vector<std::pair<std::string, std::vector<float>>> params;
  std::vector<std::pair<std::string, std::vector<float>>> optimizer;
  std::vector<std::vector<std::size_t>> param_shapes;      // parallel to params
  std::vector<std::vector<std::size_t>> optimizer_shapes;  // parallel to optimizer
  // Non-trainable state (group `buffers`, absent when the model has none).
  std::vector<std::pair<std::string, std::vector<float>>> buffers;
  std::vector<std::vector<std::size_t>> buffer_shapes;
  std::string path;
};

// Reads and checks a checkpoint's structure: a readable HDF5 file with the
// format version this build reads, every attribute present and well typed, and
// the groups `params` and `optimizer` holding float datasets. Throws Error
// naming the file and what is wrong (corrupt or truncated file, missing group
// or attribute, wrong version, checksum failure).
LoadedCheckpoint read_checkpoint(const std::string& path);

// What the running job expects a checkpoint to hold.
struct TensorSpec {
  std::string name;
  std::vector<std::size_t> shape;
};
struct CheckpointExpectation {
  std::uint64_t model_hash = 0;
  std::string model_spec;  // only for the error message
  std::vector<TensorSpec> params;
  // Checked only when set: an optimizer that keeps no state expects an empty list.
  std::optional<std::vector<TensorSpec>> optimizer;
  std::vector<TensorSpec> buffers;  // the model's non-trainable state, if any
};

// Throws Error naming the file when the checkpoint was written for another
// model (hash), or its tensors differ in number, name, order or shape.
void validate_checkpoint(const LoadedCheckpoint& checkpoint, const CheckpointExpectation& expected);

// read_checkpoint followed by validate_checkpoint.
LoadedCheckpoint read_checkpoint(const std::string& path, const CheckpointExpectation& expected);

// Complete checkpoints in `dir` (files named exactly ckpt-<step>.h5; temporaries
// and other files are ignored), sorted by step ascending. A missing directory
// has none.
std::vector<std::pair<std::uint64_t, std::string>> list_checkpoints(const std::string& dir);

// The path of the highest-step complete checkpoint in `dir`, if any.
std::optional<std::string> latest_checkpoint(const std::string& dir);

// The newest checkpoint in `dir` that read_checkpoint accepts. A newer file
// that cannot be read (truncated, corrupt, another format version) is skipped
// and named in `skipped` with the reason, so `--resume latest` survives a
// damaged newest file. nullopt when `dir` holds no checkpoint; Error when it
// holds some and none reads (starting afresh would silently lose the run).
struct SkippedCheckpoint {
  std::string path;
  std::string reason;
};
// A checkpoint that exists but may not be read is a PermissionError, never
// skipped: it may be the newest good state.
std::optional<LoadedCheckpoint> read_newest_intact_checkpoint(
    const std::string& dir, std::vector<SkippedCheckpoint>* skipped = nullptr);

// The path of the newest checkpoint in `dir` that reads, for a tool given a
// directory (eval --ckpt DIR, predict): a warning names each newer file
// skipped and why. Error naming `flag` and `dir` when none reads.
std::string newest_intact_checkpoint_path(const std::string& dir, const std::string& flag);

// "ckpt-<step>.h5"
std::string checkpoint_file_name(std::uint64_t step);

}  // namespace ringtrain
