#include "ringtrain/train/evaluator.h"

#include <cmath>

#include "ringtrain/core/buffer_copy.h"
#include "ringtrain/core/check.h"
#include "ringtrain/data/prefetcher.h"
#include "ringtrain/tensor/device_memory.h"

namespace ringtrain {

std::uint64_t EvalResult::correct() const {
  std::uint64_t c = 0;
  for (int k = 0; k < num_classes; ++k)
    c += confusion[static_cast<std::size_t>(k) * static_cast<std::size_t>(num_classes) +
                   static_cast<std::size_t>(k)];
  return c;
}

std::vector<double> EvalResult::per_class_accuracy() const {
  std::vector<double> acc(static_cast<std::size_t>(num_classes), 0.0);
  const auto nc = static_cast<std::size_t>(num_classes);
  for (std::size_t t = 0; t < nc; ++t) {
    std::uint64_t row = 0;
    for (std::size_t p = 0; p < nc; ++p) row += confusion[t * nc + p];
    if (row > 0) acc[t] = static_cast<double>(confusion[t * nc + t]) / static_cast<double>(row);
  }
  return acc;
}

namespace {

// A language model: the loss sum and the correct and counted tokens, summed
// over the ranks (exact integers, the loss in f64), with no confusion matrix
// (50257 x 50257 would not fit).
EvalResult evaluate_tokens(Model& model, Dataset& data, Communicator& control, std::size_t batch,
                           Device device) {
  EvalResult result;                   // num_classes 0: no confusion matrix or per-class figures
  std::int64_t counts[3] = {0, 0, 0};  // windows, tokens, correct tokens
  double loss_sum = 0;
  const EvalShard shard = eval_shard(data.size(), control.rank(), control.size());
  EvalBatches batches(data, shard, batch, 2, device);
  while (auto b = batches.next()) {
    const Model::LossResult r =
        model.forward(b->x.as<const float>(), b->y.as<const std::int32_t>(), b->size,
                      /*training=*/false);
    loss_sum += r.loss_sum;
    counts[0] += static_cast<std::int64_t>(b->size);
    counts[1] += static_cast<std::int64_t>(r.counted);
    counts[2] += static_cast<std::int64_t>(r.correct);
  }
  control.allreduce(BufferView{counts, 3, DType::i64, Device::cpu()},
                    BufferView{counts, 3, DType::i64, Device::cpu()}, ReduceOp::sum);
  control.allreduce(BufferView{&loss_sum, 1, DType::f64, Device::cpu()},
                    BufferView{&loss_sum, 1, DType::f64, Device::cpu()}, ReduceOp::sum);
  result.n = static_cast<std::uint64_t>(counts[0]);
  RT_CHECK_EQ(result.n, static_cast<std::uint64_t>(data.size()), "evaluation window count");
  result.tokens = static_cast<std::uint64_t>(counts[1]);
  result.loss = result.tokens ? loss_sum / static_cast<double>(result.tokens) : 0.0;
  result.accuracy =
      result.tokens ? static_cast<double>(counts[2]) / static_cast<double>(result.tokens) : 0.0;
  result.perplexity = std::exp(result.loss);
  return result;
}

}  // namespace

EvalResult evaluate(Model& model, Dataset& data, Communicator& control, std::size_t batch,
                    Device device) {
  if (model.rows_per_sample() > 1) return evaluate_tokens(model, data, control, batch, device);
  const int nc = data.num_classes();
  const auto ncs = static_cast<std::size_t>(nc);
  EvalResult result;
  result.num_classes = nc;
  // The confusion matrix and then n travel as exact integers; the loss sum
  // travels as f64.
  std::vector<std::int64_t> counts(ncs * ncs + 1, 0);
  double loss_sum = 0;

  const EvalShard shard = eval_shard(data.size(), control.rank(), control.size());
  EvalBatches batches(data, shard, batch, 2, device);
  std::vector<float> logits_host;
  std::vector<std::int32_t> labels_host;
  while (auto b = batches.next()) {
    Model::LossResult r =
        model.forward(b->x.as<const float>(), b->y.as<const std::int32_t>(), b->size,
                      /*training=*/false);
    loss_sum += r.loss_sum;
    model.synchronize();
    logits_host.resize(b->size * ncs);
    labels_host.resize(b->size);
    model.copy_logits(0, logits_host.data(), logits_host.size());
    copy_view(view_of(labels_host.data(), labels_host.size()), b->y.slice(0, b->size));
    for (std::size_t i = 0; i < b->size; ++i) {
      const float* row = logits_host.data() + i * ncs;
      std::size_t best = 0;
      for (std::size_t k = 1; k < ncs; ++k)
        if (row[k] > row[best]) best = k;
      counts[static_cast<std::size_t>(labels_host[i]) * ncs + best] += 1;
    }
    counts[ncs * ncs] += static_cast<std::int64_t>(b->size);
  }
  control.allreduce(BufferView{counts.data(), counts.size(), DType::i64, Device::cpu()},
                    BufferView{counts.data(), counts.size(), DType::i64, Device::cpu()},
                    ReduceOp::sum);
  control.allreduce(BufferView{&loss_sum, 1, DType::f64, Device::cpu()},
                    BufferView{&loss_sum, 1, DType::f64, Device::cpu()}, ReduceOp::sum);
  result.n = static_cast<std::uint64_t>(counts[ncs * ncs]);
  RT_CHECK_EQ(result.n, static_cast<std::uint64_t>(data.size()), "evaluation sample count");
  result.confusion.assign(counts.begin(), counts.begin() + static_cast<std::ptrdiff_t>(ncs * ncs));
  result.loss = result.n ? loss_sum / static_cast<double>(result.n) : 0.0;
  result.accuracy =
      result.n ? static_cast<double>(result.correct()) / static_cast<double>(result.n) : 0.0;
  return result;
}

}  // namespace ringtrain
