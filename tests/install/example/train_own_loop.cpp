// A training loop of our own on ringtrain's runtime: start-up, the sharded
// loader, overlapped gradient averaging over our flat gradient buffer, and
// checkpoints of our named tensors. The model is a ringtrain Model built from a
// spec that names our own layer (layernorm, registered below).
//
//   mpirun -np 2 ./train_own_loop --data fashion.h5 --steps 200 [--ckpt-dir D]
//       [--compare ckpt-20.h5] [--min-accuracy 0.7]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "layernorm.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/log.h"
#include "ringtrain/data/sharded_loader.h"
#include "ringtrain/model/model.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/sync/param_gradient_sync.h"
#include "ringtrain/tensor/tensor.h"
#include "ringtrain/train/checkpoint.h"
#include "ringtrain/train/evaluator.h"
#include "ringtrain/train/runtime.h"
#include "ringtrain/train/tensor_checkpoint.h"

namespace {

struct Flags {
  std::string data, ckpt_dir, compare;
  std::string model = "input(1, 28, 28); flatten; linear(out=64); layernorm; relu; linear(out=10)";
  std::size_t batch = 32, steps = 200;
  float lr = 0.05f;
  std::uint64_t seed = 42;
  double min_accuracy = 0;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--data")
      f.data = v;
    else if (k == "--model")
      f.model = v;
    else if (k == "--batch")
      f.batch = std::stoul(v);
    else if (k == "--steps")
      f.steps = std::stoul(v);
    else if (k == "--lr")
      f.lr = std::stof(v);
    else if (k == "--seed")
      f.seed = std::stoull(v);
    else if (k == "--ckpt-dir")
      f.ckpt_dir = v;
    else if (k == "--compare")
      f.compare = v;
    else if (k == "--min-accuracy")
      f.min_accuracy = std::stod(v);
    else
      throw ringtrain::Error("unknown flag " + k);
  }
  if (f.data.empty()) throw ringtrain::Error("--data is required");
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  return ringtrain::run_guarded([&] {
    using namespace ringtrain;
    const Flags f = parse(argc, argv);
    Runtime rt(&argc, &argv);  // MPI, topology, device, communicators
    LayerRegistry::global().add(example::layernorm_type());

    ShardedLoader loader(rt.control(), f.data, "train", f.batch, rt.rank(), rt.world_size(), f.seed,
                         {}, rt.device());
    ModelOptions options;
    options.device = rt.device();
    options.seed = f.seed;
    options.max_batch = f.batch;
    auto model = Model::build(ModelSpec::parse(f.model), loader.dataset().sample_shape(),
                              loader.dataset().num_classes(), options);
    // Gradients where the backend reduces them best; parameters from rank 0.
    BufferView grads = rt.comm().allocate(model->param_count(), DType::f32);
    model->bind_gradient_buffer(grads);
    rt.comm().broadcast(model->params(), model->params(), 0);
    auto optimizer = make_optimizer(OptimizerConfig{}, model->param_count(), rt.device());

    // Backward finishes the last layer first: register in that order.
    ParamGradientSync sync(rt.comm(), grads, std::size_t{1} << 20, true, model->compute_stream());
    const std::size_t layers = model->layer_count();
    for (std::size_t k = 0; k < layers; ++k) {
      const auto [begin, end] = model->layer_param_range(layers - 1 - k);
      sync.add_param(model->layer_name(layers - 1 - k), begin, end - begin);
    }
    rt.agree({{"batch", f.batch}, {"seed", f.seed}, {"parameters", model->param_count()}});
    log0("own loop: {} ranks, global batch {}, {} parameters\n{}", rt.world_size(),
         loader.sampler().global_batch(), model->param_count(), sync.buckets().describe());

    for (std::size_t step = 0; step < f.steps; ++step) {
      const Batch batch = loader.next();
      model->set_dropout_context(static_cast<std::uint64_t>(rt.rank()), step);
      model->forward_accumulate(batch.x.as<const float>(), batch.y.as<const std::int32_t>(),
                                batch.size, true);
      sync.begin_step();
      model->backward(1.0f, false, [&](std::size_t layer) { sync.mark_ready(layers - 1 - layer); });
      sync.wait();
      optimizer->step(model->params(), grads, f.lr);
      if ((step + 1) % 50 == 0) {
        const auto totals = model->take_loss_totals();
        log0("step {}: loss {:.4f}", step + 1, totals.loss_sum / (50.0 * batch.size));
      }
    }

    // Our tensors, on the host, by the model's parameter names.
    std::vector<float> host(model->param_count());
    model->synchronize();
    const BufferView params = model->params();
    std::vector<NamedTensor> tensors;
    Tensor::borrow(host.data(), Shape{host.size()}, DType::f32, Device::cpu())
        .copy_from(Tensor::borrow(params, Shape{params.count}));
    for (const ParamInfo& p : model->param_info())
      tensors.push_back({p.name, p.shape, host.data() + p.offset});
    if (!f.ckpt_dir.empty()) {
      const TrainingPosition at{f.steps, loader.cursor(), loader.sampler().global_batch()};
      log0("checkpoint {}",
           save_tensor_checkpoint(rt.rank(), f.ckpt_dir, at, tensors, model->spec().to_string()));
    }
    int rc = 0;
    if (!f.compare.empty()) {
      // Another run's checkpoint (e.g. `ringtrain train --plugin`): same tensors?
      const LoadedCheckpoint other = read_checkpoint(f.compare);
      double worst = 0;
      for (const auto& [name, values] : other.params)
        for (const ParamInfo& p : model->param_info())
          if (p.name == name)
            for (std::size_t i = 0; i < p.count; ++i)
              worst = std::max(worst, std::abs(double(values[i]) - host[p.offset + i]));
      log0("largest difference from {}: {:.3g} over {} tensors", f.compare, worst,
           other.params.size());
      if (other.params.size() != model->param_info().size() || worst != 0.0) rc = 1;
    }
    Dataset test = Dataset::open_on_all_ranks(f.data, "test", rt.control());
    const EvalResult r = evaluate(*model, test, rt.control(), f.batch, rt.device());
    log0("test accuracy {:.4f} (n={})", r.accuracy, r.n);
    if (r.accuracy < f.min_accuracy) {
      log0("accuracy below {}", f.min_accuracy);
      rc = 1;
    }
    return rc;
  });
}
