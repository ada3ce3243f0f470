// --cuda-graph's capture (core/stream_graph.h) on a GPU: a model's forward
// (with the fused loss) and backward captured once and replayed give the
// eager steps' loss totals and gradients bit for bit, with SGD updates
// between the replays outside the graph (the replay reads the updated
// weights in place); resnet20 (BatchNorm, convolutions, NHWC, bf16) and
// gpt-nano without dropout (SDPA, the tied head). A model with dropout is
// refused by bench step (cuda_graph_refusals, on the CPU). Exits 77 (ctest:
// skipped) without CUDA or a device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstring>
#include <string>
#include <vector>

#include "core/stream_graph.h"
#include "ringtrain/launch/gpu_runtime.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "ringtrain/optim/optimizer.h"
#include "ringtrain/tensor/tensor.h"
#include "tests/model/test_data.h"
#include "tests/support/gpu_compare.h"
#include "tests/support/gpu_test.h"

using namespace ringtrain;
using namespace ringtrain::test;

namespace {

struct Outcome {
  std::vector<float> grads, params;
  double loss = 0;
};

// `steps` training steps: forward with the fused loss, backward, SGD; the
// forward + backward eager or (graph) captured once and replayed.
Outcome train(const std::string& spec, const std::vector<std::size_t>& input, int classes,
              DType precision, bool graph, std::size_t steps) {
  const std::size_t batch = 4;
  ModelOptions o;
  o.device = kGpu;
  o.tf32 = Tf32Mode::off;
  o.seed = 5;
  o.max_batch = batch;
  o.precision = precision;
  auto m = Model::build(ModelSpec::parse(spec), input, classes, o);
  REQUIRE_FALSE(m->draws_dropout_masks());
  OptimizerConfig oc;
  oc.kind = "sgd";
  auto sgd = make_optimizer(oc, m->param_count(), kGpu);
  std::size_t features = 1;
  for (std::size_t d : input) features *= d;
  const bool tokens = m->rows_per_sample() > 1;
  std::vector<float> x(batch * features);
  std::vector<std::int32_t> y(batch * m->rows_per_sample());
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = tokens ? static_cast<float>((i * 7 + 3) % static_cast<std::size_t>(classes))
                  : static_cast<float>((i * 2654435761u) % 1000) / 1000.0f;
  for (std::size_t i = 0; i < y.size(); ++i)
    y[i] = static_cast<std::int32_t>((i * 5 + 1) % static_cast<std::size_t>(classes));
  Tensor xd = to_gpu(x), yd = to_gpu(y);
  const auto step = [&] {
    m->forward_accumulate_fused_loss(xd.data_as<float>(), yd.data_as<std::int32_t>(), batch, 1.0f);
    m->backward(1.0f, false);
  };
  step();  // the warm-up: plans, engines and workspaces for this batch
  sgd->step(m->params(), m->grads(), 0.01f);
  detail::StreamGraph g;
  if (graph) {
    g.capture(m->compute_stream(), step, spec);
    CHECK(g.nodes() > 0);
  }
  for (std::size_t s = 0; s < steps; ++s) {
    if (graph)
      g.replay(m->compute_stream());
    else
      step();
    if (s + 1 < steps) sgd->step(m->params(), m->grads(), 0.01f);
  }
  m->synchronize();
  Outcome out;
  out.loss = m->take_loss_totals().loss_sum;
  out.grads.resize(m->param_count());
  out.params.resize(m->param_count());
  Tensor::borrow(out.grads.data(), {out.grads.size()}, DType::f32, Device::cpu())
      .copy_from(Tensor::borrow(m->grads().ptr, {out.grads.size()}, DType::f32, kGpu));
  Tensor::borrow(out.params.data(), {out.params.size()}, DType::f32, Device::cpu())
      .copy_from(Tensor::borrow(m->params().ptr, {out.params.size()}, DType::f32, kGpu));
  return out;
}

void same_bits(const Outcome& a, const Outcome& b) {
  CHECK(a.loss == b.loss);
  REQUIRE(a.grads.size() == b.grads.size());
  CHECK(std::memcmp(a.grads.data(), b.grads.data(), a.grads.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(a.params.data(), b.params.data(), a.params.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_CASE("gpu cuda graph: resnet20 replayed gives the eager steps' bits", "[gpu][cuda_graph]") {
  const DType p = GENERATE(DType::f32, DType::bf16);
  INFO(dtype_name(p));
  same_bits(train("resnet20", {3, 32, 32}, 10, p, false, 3),
            train("resnet20", {3, 32, 32}, 10, p, true, 3));
}

TEST_CASE("gpu cuda graph: gpt-nano without dropout replayed gives the eager steps' bits",
          "[gpu][cuda_graph]") {
  const DType p = GENERATE(DType::f32, DType::bf16);
  INFO(dtype_name(p));
  same_bits(train("gpt-nano:dropout=0", {128}, 64, p, false, 3),
            train("gpt-nano:dropout=0", {128}, 64, p, true, 3));
}

int main(int argc, char** argv) {
  if (!ringtrain::test::cuda_device_available()) return ringtrain::test::kSkippedExitCode;
  cuda_set_device(0);
  return Catch::Session().run(argc, argv);
}
