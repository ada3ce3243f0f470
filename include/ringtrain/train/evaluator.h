// Evaluation over a whole split, sharded across ranks with no padding and no
// duplicates (DESIGN.md "Sharding"). The loss sum, sample count and confusion
// matrix are summed with an all-reduce, so the figures are exact over all N and
// the same on every rank, whatever the world size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/model/model.h"

namespace ringtrain {

// A language model (Model::rows_per_sample() > 1) is evaluated per token:
// loss and accuracy are means over the `tokens` labels that are not
// kIgnoreLabel, perplexity is exp(loss), and there is no confusion matrix.
struct EvalResult {
  std::uint64_t n = 0;
  double loss = 0;           // mean over all n samples (a language model: over its tokens)
  double accuracy = 0;       // correct / n (a language model: correct / tokens)
  std::uint64_t tokens = 0;  // a language model's predicted tokens; 0 otherwise
  double perplexity = 0;     // exp(loss), a language model's
  int num_classes = 0;
  // confusion[true_class * num_classes + predicted_class]
  std::vector<std::uint64_t> confusion;

  std::uint64_t correct() const;
  // Per class: correct / samples of that class (NaN-free: 0 where a class has none).
  std::vector<double> per_class_accuracy() const;
};

// Collective over `control` (a host communicator). `batch` bounds the model's
// workspace (it must not exceed the model's max batch).
EvalResult evaluate(Model& model, Dataset& data, Communicator& control, std::size_t batch,
                    Device device);

}  // namespace ringtrain
