// Checkpoints of a program's own named tensors with the data cursor, in
// `ringtrain train`'s format and with its rules (checkpoint.h): rank 0 writes
// ckpt-<step>.h5 under a temporary name, fsyncs and renames it (never half
// written) and keeps the newest `keep`; loading checks every tensor's name and
// shape, and a cursor saved under another global batch is converted to the
// same sample position, or refused when the new global batch does not divide it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ringtrain/data/sharded_sampler.h"

namespace ringtrain {

// A tensor in host memory: product(shape) floats at data.
struct NamedTensor {
  std::string name;
  std::vector<std::size_t> shape;
  float* data = nullptr;
};

struct TrainingPosition {
  std::uint64_t step = 0;          // optimizer steps done
  DataCursor cursor;               // the next global step the loader reads
  std::uint64_t global_batch = 0;  // samples per optimizer step over all ranks
};

// Writes dir/ckpt-<step>.h5 when rank == 0 (other ranks return the same path
// and write nothing). `tag` identifies the model (e.g. its spec): a load with
// another tag is refused. Error naming the file on any failure; the previous
// checkpoints are then untouched.
std::string save_tensor_checkpoint(int rank, const std::string& dir,
                                   const TrainingPosition& position,
                                   const std::vector<NamedTensor>& tensors,
                                   const std::string& tag = "", std::size_t keep = 3);

// Reads `path_or_dir` (a checkpoint file, or a directory: its newest
// checkpoint; nullopt when it has none, which suits requeued jobs) into the
// tensors, checking names, order and shapes, and returns the position with the
// cursor converted to `global_batch`. Every rank reads the file itself.
std::optional<TrainingPosition> load_tensor_checkpoint(const std::string& path_or_dir,
                                                       const std::vector<NamedTensor>& tensors,
                                                       std::uint64_t global_batch,
                                                       const std::string& tag = "");

}  // namespace ringtrain
