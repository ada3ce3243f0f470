#include "model/batch_norm_layer.h"
#include "model/conv2d_layer.h"
#include "model/layer.h"
#include "model/linear_layer.h"
#include "model/merge_layers.h"
#include "model/stateless_layers.h"
#include "model/transformer_layers.h"
#include "ringtrain/core/check.h"
#include "ringtrain/model/layer_registry.h"

namespace ringtrain {

std::unique_ptr<Layer> make_layer(const LayerSpec& spec, const std::vector<Shape>& inputs,
                                  const std::string& name, std::size_t index,
                                  const ComputeContext& ctx, std::size_t max_batch,
                                  const DropoutContext& dropout) {
  RT_CHECK(!inputs.empty(), "layer {} ({}) has no input", index, spec.to_string());
  if (spec.kind == LayerKind::add)
    return std::make_unique<AddLayer>(name, inputs, static_cast<float>(spec.scale), ctx);
  if (spec.kind == LayerKind::concat) return std::make_unique<ConcatLayer>(name, inputs, ctx);
  RT_CHECK(inputs.size() == 1, "layer {} ({}) takes one input, got {}", index, spec.to_string(),
           inputs.size());
  const Shape& input = inputs[0];
  switch (spec.kind) {
    case LayerKind::linear:
      RT_CHECK(input.rank() == 1 || input.rank() == 2,
               "layer {} ({}) needs a flat [features] or [rows, features] input but gets {}: put "
               "'flatten' before it",
               index, spec.to_string(), input.to_string());
      return std::make_unique<LinearLayer>(name, input, spec.out, ctx);
    case LayerKind::conv2d: {
      RT_CHECK(input.rank() == 3,
               "layer {} ({}) needs a [channels, height, width] input but gets {}", index,
               spec.to_string(), input.to_string());
      Conv2dGeometry g{input[0],    input[1],     input[2],      spec.out,      spec.kernel,
                       spec.stride, spec.padding, spec.kernel_w, spec.stride_w, spec.padding_w};
      RT_CHECK(g.kh() <= input[1] + 2 * g.ph() && g.kw() <= input[2] + 2 * g.pw(),
               "layer {} ({}): kernel {}x{} does not fit the input {} with padding {}x{}", index,
               spec.to_string(), g.kh(), g.kw(), input.to_string(), g.ph(), g.pw());
      return std::make_unique<Conv2dLayer>(name, g, ctx, max_batch, spec.bias);
    }
    case LayerKind::max_pool2d:
    case LayerKind::avg_pool2d: {
      RT_CHECK(input.rank() == 3,
               "layer {} ({}) needs a [channels, height, width] input but gets {}", index,
               spec.to_string(), input.to_string());
      RT_CHECK(
          spec.kernel <= input[1] + 2 * spec.padding && spec.kernel <= input[2] + 2 * spec.padding,
          "layer {} ({}): kernel {} does not fit the input {} with padding {}", index,
          spec.to_string(), spec.kernel, input.to_string(), spec.padding);
      Pool2dGeometry g{input[0],
                       input[1],
                       input[2],
                       spec.kernel,
                       spec.stride,
                       spec.padding,
                       spec.kind == LayerKind::max_pool2d ? PoolMode::max : PoolMode::average};
      return std::make_unique<Pool2dLayer>(name, g, ctx, max_batch);
    }
    case LayerKind::global_avg_pool:
      RT_CHECK(input.rank() == 3,
               "layer {} ({}) needs a [channels, height, width] input but gets {}", index,
               spec.to_string(), input.to_string());
      return std::make_unique<GlobalAvgPoolLayer>(name, input, ctx);
    case LayerKind::batch_norm:
      RT_CHECK(input.rank() == 1 || input.rank() == 3,
               "layer {} ({}) needs a [features] or [channels, height, width] input but gets {}",
               index, spec.to_string(), input.to_string());
      return std::make_unique<BatchNormLayer>(name, input, spec, ctx);
    case LayerKind::add:
    case LayerKind::concat:
      break;  // above
    case LayerKind::relu:
      return std::make_unique<ElementwiseActivationLayer>(name, input, ctx, kReluActivation);
    case LayerKind::gelu:
      return std::make_unique<ElementwiseActivationLayer>(name, input, ctx, kGeluActivation);
    case LayerKind::flatten:
      return std::make_unique<FlattenLayer>(name, input);
    case LayerKind::gelu_tanh:
      RT_CHECK(!ctx.is_cuda(),
               "layer {} ({}): gelu_tanh is not yet implemented on the GPU (transformer layers "
               "run on the CPU for now: pass --device cpu)",
               index, spec.to_string());
      return std::make_unique<ElementwiseActivationLayer>(name, input, ctx, kGeluTanhActivation);
    case LayerKind::token_embedding:
      RT_CHECK(input.rank() == 1, "layer {} ({}) needs [T] token ids but gets {}", index,
               spec.to_string(), input.to_string());
      return std::make_unique<TokenEmbeddingLayer>(name, input, spec.vocab, spec.out, ctx);
    case LayerKind::position_embedding:
      RT_CHECK(input.rank() == 2 && input[0] <= spec.context,
               "layer {} ({}) needs [T, C] rows with T <= {} but gets {}", index, spec.to_string(),
               spec.context, input.to_string());
      return std::make_unique<PositionEmbeddingLayer>(name, input, spec.context, ctx);
    case LayerKind::layer_norm:
      return std::make_unique<LayerNormLayer>(name, input, static_cast<float>(spec.eps), ctx,
                                              max_batch);
    case LayerKind::causal_self_attention:
      RT_CHECK(input.rank() == 2, "layer {} ({}) needs [T, C] rows but gets {}", index,
               spec.to_string(), input.to_string());
      return std::make_unique<CausalSelfAttentionLayer>(name, input, spec.heads, ctx, max_batch);
    case LayerKind::lm_head:
      RT_CHECK(input.rank() == 2, "layer {} ({}) needs [T, C] rows but gets {}", index,
               spec.to_string(), input.to_string());
      // The vocabulary is the tied embedding's: Model::build checks the pair.
      return std::make_unique<TiedLmHeadLayer>(name, input, spec.tied, spec.vocab, ctx);
    case LayerKind::dropout:
      return std::make_unique<DropoutLayer>(name, input, static_cast<float>(spec.p), index, ctx,
                                            dropout);
    case LayerKind::custom: {
      const LayerType* type = LayerRegistry::global().find(spec.type);
      RT_CHECK(type != nullptr,
               "layer {} ({}): no layer type '{}' is registered (load its plugin with --plugin)",
               index, spec.to_string(), spec.type);
      RT_CHECK(type->gpu || !ctx.is_cuda(),
               "layer {} ({}): type '{}' from {} runs on the CPU only, and this model is on {}",
               index, spec.to_string(), spec.type, type->origin, device_name(ctx.device()));
      std::unique_ptr<Layer> layer =
          type->make(LayerArgs(name, spec.args), LayerBuild{name, input, index, max_batch, &ctx});
      RT_CHECK(layer != nullptr, "layer {} ({}): the factory of '{}' from {} returned no layer",
               index, spec.to_string(), spec.type, type->origin);
      RT_CHECK(layer->input_shape() == input,
               "layer {} ({}): type '{}' built a layer for input {} but gets {}", index,
               spec.to_string(), spec.type, layer->input_shape().to_string(), input.to_string());
      return layer;
    }
  }
  RT_CHECK(false, "layer {}: unknown kind", index);
  return nullptr;
}

}  // namespace ringtrain
