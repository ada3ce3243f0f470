// The model's adapter: under bf16/fp16 a layer that takes only fp32 (a
// plugin's, or a built-in one not yet stored) gets its inputs, output and
// output gradient widened to fp32 and what it writes narrowed into the 16-bit
// buffers. It must give the numbers of the stored path bit for bit: here the
// built-in BatchNorm and relu, which store their own activations, against the
// same layers wrapped in a registered type that only has the fp32 interface,
// in a residual graph where an adapted layer writes into a summed (fp32)
// gradient and a stored one reads an adapted one's output, in both layouts.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "model/layer.h"
#include "ringtrain/model/layer_registry.h"
#include "ringtrain/model/model.h"
#include "ringtrain/model/model_spec.h"
#include "tests/model/test_data.h"

using namespace ringtrain;

namespace {

// A built-in layer seen only through Layer (as a plugin's would be).
class Fp32Only final : public Layer {
 public:
  explicit Fp32Only(std::unique_ptr<Layer> inner)
      : Layer(inner->name(), inner->input_shape(), inner->output_shape()),
        inner_(std::move(inner)) {}
  std::vector<ParamDesc> param_descs() const override { return inner_->param_descs(); }
  std::vector<ParamDesc> buffer_descs() const override { return inner_->buffer_descs(); }
  void bind_buffers(float* b) override { inner_->bind_buffers(b); }
  void bind(float* p, float* g) override { inner_->bind(p, g); }
  void forward(const float* x, float* y, std::size_t batch, bool training) override {
    inner_->forward(x, y, batch, training);
  }
  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch,
                bool accumulate) override {
    inner_->backward(x, y, dy, dx, batch, accumulate);
  }

 private:
  std::unique_ptr<Layer> inner_;
};

// "plain_<kind>": the built-in `kind` behind Fp32Only.
void register_plain(const std::string& kind) {
  const std::string name = "plain_" + kind;
  if (LayerRegistry::global().find(name) != nullptr) return;
  LayerType t;
  t.name = name;
  t.gpu = true;
  t.channels_last = true;
  t.make = [kind](const LayerArgs&, const LayerBuild& b) -> std::unique_ptr<Layer> {
    const ModelSpec spec = ModelSpec::parse(kind);
    return std::make_unique<Fp32Only>(make_layer(spec.layers.at(0), b.inputs, b.name, b.index,
                                                 *b.ctx, b.max_batch, *b.dropout, b.layout));
  };
  LayerRegistry::global().add(t);
}

struct Step {
  double loss = 0;
  std::vector<float> grads;
};

Step step(const std::string& spec, DType precision, LayoutChoice layout,
          std::vector<DType>* dtypes) {
  ModelOptions o;
  o.device = Device::cpu();
  o.seed = 3;
  o.max_batch = 4;
  o.precision = precision;
  o.layout = layout;
  auto m = Model::build(ModelSpec::parse(spec), {3, 6, 6}, 3, o);
  const std::size_t batch = 4;
  const std::vector<float> x = test::hashed_vector(7, batch * 3 * 6 * 6);
  const std::vector<std::int32_t> labels{0, 2, 1, 2};
  Step s;
  s.loss = m->forward(x.data(), labels.data(), batch, true).loss_sum;
  m->backward(1.0f, false);
  const BufferView g = m->grads();
  s.grads.resize(g.count);
  std::memcpy(s.grads.data(), g.ptr, g.bytes());
  for (std::size_t i = 0; i < m->layer_count(); ++i) dtypes->push_back(m->layer_output_dtype(i));
  return s;
}

}  // namespace

TEST_CASE("the adapter around an fp32-only layer gives the stored path's bits",
          "[model][precision]") {
  register_plain("batch_norm");
  register_plain("relu");
  const std::string graph =
      "c1 = conv2d(out=4, kernel=3, padding=1, bias=0); b1 = {bn}; r1 = {relu}\n"
      "c2 = conv2d(r1, out=4, kernel=3, padding=1, bias=0); b2 = {bn}\n"
      "s = add(b2, r1); relu; global_avg_pool; linear(out=3)";
  const auto spec = [&](const char* bn, const char* relu) {
    std::string g = graph;
    for (std::size_t at; (at = g.find("{bn}")) != std::string::npos;) g.replace(at, 4, bn);
    for (std::size_t at; (at = g.find("{relu}")) != std::string::npos;) g.replace(at, 6, relu);
    return g;
  };
  for (const DType p : {DType::bf16, DType::f16}) {
    for (const LayoutChoice layout : {LayoutChoice::nchw, LayoutChoice::nhwc}) {
      INFO(dtype_name(p) << (layout == LayoutChoice::nhwc ? " nhwc" : " nchw"));
      std::vector<DType> stored_dtypes, adapted_dtypes;
      const Step stored = step(spec("batch_norm", "relu"), p, layout, &stored_dtypes);
      const Step adapted = step(spec("plain_batch_norm", "plain_relu"), p, layout, &adapted_dtypes);
      CHECK(adapted.loss == stored.loss);
      CHECK(adapted.grads == stored.grads);
      // The adapted nodes' outputs are 16-bit buffers too, the logits as well.
      CHECK(adapted_dtypes == stored_dtypes);
      CHECK(adapted_dtypes.at(1) == p);
      CHECK(adapted_dtypes.back() == p);
      // And the 16-bit run is not the fp32 one.
      std::vector<DType> wide_dtypes;
      const Step wide = step(spec("batch_norm", "relu"), DType::f32, layout, &wide_dtypes);
      CHECK(wide.grads != stored.grads);
    }
  }
}
