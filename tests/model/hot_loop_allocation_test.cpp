// Workspaces are planned at build time: after the first step, a training step
// (forward, backward with a bucket callback, SGD update) performs no heap
// allocation, in fp32 and in bf16 (16-bit buffers, the stored layers and the
// adapter's widening around the others). Counted through a replaced global operator new, which is
// why this test is its own executable.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdlib>
#include <new>

#include "ringtrain/model/model.h"
#include "tests/model/test_data.h"

namespace {
std::atomic<std::size_t> g_allocations{0};
}  // namespace

void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

using namespace ringtrain;

namespace {
// The library convolutions (oneDNN) allocate their small argument maps inside
// every call; ringtrain's own code allocates nothing. With im2col every
// convolution is ringtrain's own, so the whole step must allocate nothing;
// with oneDNN the count per step must stay the same (nothing grows).
struct ConvBackend {
  const char* name;
  bool own;
};
}  // namespace

TEST_CASE("a training step allocates nothing of its own once the model is built",
          "[model][allocation]") {
  for (const DType precision : {DType::f32, DType::bf16})
    for (const ConvBackend backend : {ConvBackend{"im2col", true}, ConvBackend{"onednn", false}})
      for (const char* spec :
           {"mlp:784-128-10", "cnn",
            "conv2d(out=4, kernel=3, stride=2); gelu; max_pool2d(kernel=2); flatten; "
            "dropout(p=0.5); linear(out=10)",
            // a graph: fan-out, add, concat, BatchNorm, pools
            "a = conv2d(out=4, kernel=3, padding=1, bias=0); b = batch_norm; c = relu; "
            "d = conv2d(c, out=4, kernel=3, padding=1); e = add(d, c); f = concat(e, c); "
            "avg_pool2d(kernel=3, stride=2, padding=1); max_pool2d(kernel=3, stride=2, padding=1); "
            "global_avg_pool; linear(out=10)",
            "resnet20"}) {
        setenv("RINGTRAIN_CPU_CONV", backend.name, 1);
        ModelOptions o;
        o.seed = 1;
        o.max_batch = 16;
        o.precision = precision;
        auto m = Model::build(ModelSpec::parse(spec), {1, 28, 28}, 10, o);
        const std::size_t batch = 13;
        const auto x = test::hashed_vector(3, batch * 784, 0.0f, 1.0f);
        std::vector<std::int32_t> labels(batch);
        for (std::size_t i = 0; i < batch; ++i) labels[i] = static_cast<std::int32_t>(i % 10);
        std::size_t ready = 0;
        const std::function<void(std::size_t)> on_ready = [&ready](std::size_t) { ++ready; };
        auto step = [&](std::uint64_t s) {
          m->set_dropout_context(0, s);
          m->forward(x.data(), labels.data(), batch, true);
          m->backward(1.0f, s % 2 == 1, on_ready);
          float* p = m->params().as<float>();
          const float* g = m->grads().as<float>();
          for (std::size_t i = 0; i < m->param_count(); ++i) p[i] -= 0.01f * g[i];
        };
        step(0);
        step(1);
        std::size_t per_step[4];
        for (std::uint64_t s = 2; s < 6; ++s) {
          const std::size_t before = g_allocations.load();
          step(s);
          per_step[s - 2] = g_allocations.load() - before;  // read before INFO allocates
        }
        INFO(spec << " in " << dtype_name(precision) << " with " << backend.name
                  << " convolutions: " << per_step[0] << " allocations");
        if (backend.own) CHECK(per_step[0] + per_step[1] + per_step[2] + per_step[3] == 0);
        // Steps with the same accumulate flag allocate the same: nothing grows.
        CHECK(per_step[0] == per_step[2]);
        CHECK(per_step[1] == per_step[3]);
        CHECK(ready == 6 * m->layer_count());
      }
}
