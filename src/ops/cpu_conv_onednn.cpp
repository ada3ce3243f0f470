// CPU convolutions through oneDNN. Each batch size gets its primitives once
// (the last, smaller batch of an epoch its own), with oneDNN choosing the
// blocked layouts it computes fastest in; the NCHW tensors and OIHW weights
// are reordered into them and back around each call, as PyTorch's CPU path
// does with the same library. Channels-last activations are described as
// oneDNN's nhwc, and reordered the same way.
#include "ops/cpu_conv_plan.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ringtrain/config.h"
#include "ringtrain/core/check.h"

#if RINGTRAIN_ONEDNN
#include <omp.h>

#include <dnnl.hpp>
#endif

namespace ringtrain::detail {

namespace {

bool im2col_requested() {
  const char* env = std::getenv("RINGTRAIN_CPU_CONV");
  if (env == nullptr || std::string_view(env).empty() || std::string_view(env) == "onednn")
    return false;
  RT_CHECK(std::string_view(env) == "im2col", "RINGTRAIN_CPU_CONV={}: expected onednn or im2col",
           env);
  return true;
}

}  // namespace

#if RINGTRAIN_ONEDNN

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

dnnl::engine& cpu_engine() {
  static dnnl::engine engine = [] {
    // One thread per rank unless the user asked for more (OMP_NUM_THREADS):
    // ranks are the parallelism, as for OpenBLAS (compute_context.cpp).
    if (std::getenv("OMP_NUM_THREADS") == nullptr) omp_set_num_threads(1);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return engine;
}

// A user buffer (plain layout) and, when the primitive wants another layout,
// the primitive's own buffer and the reorders between them.
struct Operand {
  memory user, inner;
  dnnl::reorder to_inner, to_user;
  bool reordered = false;

  Operand(const memory::desc& plain, const memory::desc& wanted, bool in, bool out) {
    auto& engine = cpu_engine();
    user = memory(plain, engine, DNNL_MEMORY_NONE);
    reordered = plain != wanted;
    if (!reordered) return;
    inner = memory(wanted, engine);
    if (in) to_inner = dnnl::reorder(user, inner);
    if (out) to_user = dnnl::reorder(inner, user);
  }
  const memory& arg() const { return reordered ? inner : user; }
  void bind(const float* p) { user.set_data_handle(const_cast<float*>(p)); }
  void load(dnnl::stream& s) {
    if (reordered) to_inner.execute(s, user, inner);
  }
  void store(dnnl::stream& s) {
    if (reordered) to_user.execute(s, inner, user);
  }
};

struct BatchPlan {
  dnnl::convolution_forward forward;
  dnnl::convolution_backward_data backward_data;
  dnnl::convolution_backward_weights backward_weights;
  // forward: x, w -> y
  std::unique_ptr<Operand> fx, fw, fy;
  // backward data: dy, w -> dx
  std::unique_ptr<Operand> bdy, bw, bdx;
  // backward weights: x, dy -> dw
  std::unique_ptr<Operand> wx, wdy, wdw;
  std::unordered_map<int, memory> forward_args, data_args, weight_args;
};

class OnednnConvPlan final : public CpuConvPlan {
 public:
  OnednnConvPlan(const Conv2dGeometry& g, std::size_t max_batch) : g_(g), stream_(cpu_engine()) {
    // Planned for the maximum batch now; a smaller batch when it first comes.
    plan_for(max_batch);
    dw_scratch_.resize(g_.out_channels * g_.in_channels * g_.kh() * g_.kw());
  }

  void forward(const float* x, const float* w, float* y, std::size_t batch) override {
    BatchPlan& p = plan_for(batch);
    p.fx->bind(x);
    p.fw->bind(w);
    p.fy->bind(y);
    p.fx->load(stream_);
    p.fw->load(stream_);
    p.forward.execute(stream_, p.forward_args);
    p.fy->store(stream_);
    stream_.wait();
  }

  void backward_weights(const float* x, const float* dy, float* dw, std::size_t batch,
                        bool accumulate) override {
    BatchPlan& p = plan_for(batch);
    p.wx->bind(x);
    p.wdy->bind(dy);
    p.wdw->bind(accumulate ? dw_scratch_.data() : dw);
    p.wx->load(stream_);
    p.wdy->load(stream_);
    p.backward_weights.execute(stream_, p.weight_args);
    p.wdw->store(stream_);
    stream_.wait();
    if (accumulate)
      for (std::size_t i = 0; i < dw_scratch_.size(); ++i) dw[i] += dw_scratch_[i];
  }

  void backward_data(const float* w, const float* dy, float* dx, std::size_t batch) override {
    BatchPlan& p = plan_for(batch);
    p.bdy->bind(dy);
    p.bw->bind(w);
    p.bdx->bind(dx);
    p.bdy->load(stream_);
    p.bw->load(stream_);
    p.backward_data.execute(stream_, p.data_args);
    p.bdx->store(stream_);
    stream_.wait();
  }

 private:
  BatchPlan& plan_for(std::size_t batch) {
    auto it = plans_.find(batch);
    if (it != plans_.end()) return it->second;
    const auto d = [](std::size_t v) { return static_cast<memory::dim>(v); };
    const memory::dims src{d(batch), d(g_.in_channels), d(g_.height), d(g_.width)};
    const memory::dims wei{d(g_.out_channels), d(g_.in_channels), d(g_.kh()), d(g_.kw())};
    const memory::dims dst{d(batch), d(g_.out_channels), d(g_.out_height()), d(g_.out_width())};
    const memory::dims strides{d(g_.sh()), d(g_.sw())};
    const memory::dims pad_l{d(g_.ph()), d(g_.pw())};
    // Right/bottom padding: what the last window needs beyond the input
    // (floor division of the output size may leave some of it unused).
    const memory::dims pad_r{
        d((g_.out_height() - 1) * g_.sh() + g_.kh()) - d(g_.height) - d(g_.ph()),
        d((g_.out_width() - 1) * g_.sw() + g_.kw()) - d(g_.width) - d(g_.pw())};
    const memory::desc any_src(src, dt::f32, tag::any), any_wei(wei, dt::f32, tag::any),
        any_dst(dst, dt::f32, tag::any);
    // The activations as the model keeps them (NCHW or channels-last); the
    // weight is OIHW in either layout.
    const tag act = g_.layout == Layout::nhwc ? tag::nhwc : tag::nchw;
    const memory::desc plain_src(src, dt::f32, act), plain_wei(wei, dt::f32, tag::oihw),
        plain_dst(dst, dt::f32, act);
    auto& engine = cpu_engine();
    const dnnl::convolution_forward::primitive_desc fwd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_training,
                                        dnnl::algorithm::convolution_direct, any_src, any_wei,
                                        any_dst, strides, pad_l, pad_r),
        engine);
    const dnnl::convolution_backward_data::primitive_desc bwd_data(
        dnnl::convolution_backward_data::desc(dnnl::algorithm::convolution_direct, any_src, any_wei,
                                              any_dst, strides, pad_l, pad_r),
        engine, fwd);
    const dnnl::convolution_backward_weights::primitive_desc bwd_weights(
        dnnl::convolution_backward_weights::desc(dnnl::algorithm::convolution_direct, any_src,
                                                 any_wei, any_dst, strides, pad_l, pad_r),
        engine, fwd);
    BatchPlan p;
    p.forward = dnnl::convolution_forward(fwd);
    p.backward_data = dnnl::convolution_backward_data(bwd_data);
    p.backward_weights = dnnl::convolution_backward_weights(bwd_weights);
    p.fx = std::make_unique<Operand>(plain_src, fwd.src_desc(), true, false);
    p.fw = std::make_unique<Operand>(plain_wei, fwd.weights_desc(), true, false);
    p.fy = std::make_unique<Operand>(plain_dst, fwd.dst_desc(), false, true);
    p.bdy = std::make_unique<Operand>(plain_dst, bwd_data.diff_dst_desc(), true, false);
    p.bw = std::make_unique<Operand>(plain_wei, bwd_data.weights_desc(), true, false);
    p.bdx = std::make_unique<Operand>(plain_src, bwd_data.diff_src_desc(), false, true);
    p.wx = std::make_unique<Operand>(plain_src, bwd_weights.src_desc(), true, false);
    p.wdy = std::make_unique<Operand>(plain_dst, bwd_weights.diff_dst_desc(), true, false);
    p.wdw = std::make_unique<Operand>(plain_wei, bwd_weights.diff_weights_desc(), false, true);
    p.forward_args = {
        {DNNL_ARG_SRC, p.fx->arg()}, {DNNL_ARG_WEIGHTS, p.fw->arg()}, {DNNL_ARG_DST, p.fy->arg()}};
    p.data_args = {{DNNL_ARG_DIFF_DST, p.bdy->arg()},
                   {DNNL_ARG_WEIGHTS, p.bw->arg()},
                   {DNNL_ARG_DIFF_SRC, p.bdx->arg()}};
    p.weight_args = {{DNNL_ARG_SRC, p.wx->arg()},
                     {DNNL_ARG_DIFF_DST, p.wdy->arg()},
                     {DNNL_ARG_DIFF_WEIGHTS, p.wdw->arg()}};
    return plans_.emplace(batch, std::move(p)).first->second;
  }

  Conv2dGeometry g_;
  dnnl::stream stream_;
  std::map<std::size_t, BatchPlan> plans_;
  std::vector<float> dw_scratch_;
};

}  // namespace

std::unique_ptr<CpuConvPlan> make_cpu_conv_plan(const Conv2dGeometry& g, std::size_t max_batch) {
  if (im2col_requested()) return nullptr;
  try {
    return std::make_unique<OnednnConvPlan>(g, max_batch);
  } catch (const dnnl::error& e) {
    RT_CHECK(false, "oneDNN cannot plan the convolution {}x{}x{} -> {} (kernel {}x{}): {}",
             g.in_channels, g.height, g.width, g.out_channels, g.kh(), g.kw(), e.what());
  }
  return nullptr;
}

const char* cpu_conv_backend_name() {
  return im2col_requested() ? "im2col" : "onednn";
}

#else

std::unique_ptr<CpuConvPlan> make_cpu_conv_plan(const Conv2dGeometry&, std::size_t) {
  (void)im2col_requested();
  return nullptr;
}

const char* cpu_conv_backend_name() {
  return "im2col";
}

#endif

}  // namespace ringtrain::detail
