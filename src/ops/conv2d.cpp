// Conv2d on the CPU: oneDNN's primitives where the build has them
// (ops/cpu_conv_plan.h), else (and as the reference the tests compare them
// with) per sample, im2col into a [C*k*k, Ho*Wo] column block and one GEMM
// with the [out, C*k*k] weight. Per-sample blocks keep the workspace
// small (it stays in cache for the GEMM) and planned once for any batch.
// Backward recomputes the columns instead of storing them for the whole batch.
// Channels-last activations: oneDNN and cuDNN take them as they are; the
// im2col path transposes each sample to NCHW and back around itself.
#include "ringtrain/ops/conv2d.h"

#include <algorithm>
#include <cstring>

#include "ops/cpu_conv_plan.h"
#include "ops/gpu_ops.h"
#include "ringtrain/core/check.h"
#include "ringtrain/ops/bias.h"
#include "ringtrain/ops/gemm.h"
#include "ringtrain/ops/layout_transpose.h"
#include "ringtrain/ops/precision.h"
#include "ringtrain/tensor/device_memory.h"

namespace ringtrain {

void Conv2dGeometry::validate() const {
  RT_CHECK(in_channels > 0 && height > 0 && width > 0,
           "conv2d input must be non-empty, got {}x{}x{}", in_channels, height, width);
  RT_CHECK(out_channels > 0, "conv2d needs at least one output channel");
  RT_CHECK(kh() > 0 && kw() > 0, "conv2d kernel size must be at least 1");
  RT_CHECK(sh() > 0 && sw() > 0, "conv2d stride must be at least 1");
  RT_CHECK(kh() <= height + 2 * ph() && kw() <= width + 2 * pw(),
           "conv2d kernel {}x{} does not fit the input {}x{} with padding {}x{}", kh(), kw(),
           height, width, ph(), pw());
}

namespace {

// The range [lo, hi) of output positions o whose input index o*stride + offset
// - padding falls inside [0, extent).
struct ValidRange {
  std::ptrdiff_t lo, hi;
};
ValidRange valid_outputs(std::ptrdiff_t offset, std::ptrdiff_t padding, std::ptrdiff_t stride,
                         std::ptrdiff_t extent, std::ptrdiff_t outputs) {
  // smallest o with o*stride >= padding - offset
  std::ptrdiff_t need = padding - offset;
  std::ptrdiff_t lo = need <= 0 ? 0 : (need + stride - 1) / stride;
  // largest o with o*stride + offset - padding <= extent - 1
  std::ptrdiff_t top = extent - 1 + padding - offset;
  std::ptrdiff_t hi = top < 0 ? 0 : top / stride + 1;
  lo = std::min(lo, outputs);
  hi = std::clamp(hi, lo, outputs);
  return {lo, hi};
}

// Shared walk of im2col (gather) and col2im (scatter-add).
template <bool kScatter>
void im2col_walk(const Conv2dGeometry& g, float* image, float* col) {
  const auto H = static_cast<std::ptrdiff_t>(g.height), W = static_cast<std::ptrdiff_t>(g.width);
  const auto kh = static_cast<std::ptrdiff_t>(g.kh()), kw = static_cast<std::ptrdiff_t>(g.kw());
  const auto sh = static_cast<std::ptrdiff_t>(g.sh()), sw = static_cast<std::ptrdiff_t>(g.sw());
  const auto ph = static_cast<std::ptrdiff_t>(g.ph()), pw = static_cast<std::ptrdiff_t>(g.pw());
  const auto Ho = static_cast<std::ptrdiff_t>(g.out_height()),
             Wo = static_cast<std::ptrdiff_t>(g.out_width());
  for (std::ptrdiff_t c = 0; c < static_cast<std::ptrdiff_t>(g.in_channels); ++c) {
    float* plane = image + c * H * W;
    for (std::ptrdiff_t ki = 0; ki < kh; ++ki) {
      const ValidRange rows = valid_outputs(ki, ph, sh, H, Ho);
      for (std::ptrdiff_t kj = 0; kj < kw; ++kj) {
        float* block = col + ((c * kh + ki) * kw + kj) * Ho * Wo;
        const ValidRange cols = valid_outputs(kj, pw, sw, W, Wo);
        if constexpr (!kScatter) {
          std::memset(block, 0, sizeof(float) * static_cast<std::size_t>(rows.lo * Wo));
          std::memset(block + rows.hi * Wo, 0,
                      sizeof(float) * static_cast<std::size_t>((Ho - rows.hi) * Wo));
        }
        for (std::ptrdiff_t oh = rows.lo; oh < rows.hi; ++oh) {
          float* __restrict__ out = block + oh * Wo;
          // Input row of this output row; output column ow reads column
          // ow*s + kj - p, which is inside the row for ow in [cols.lo, cols.hi).
          float* __restrict__ row = plane + (oh * sh + ki - ph) * W;
          const std::ptrdiff_t shift = kj - pw;
          if constexpr (kScatter) {
            for (std::ptrdiff_t ow = cols.lo; ow < cols.hi; ++ow) row[ow * sw + shift] += out[ow];
          } else {
            for (std::ptrdiff_t ow = 0; ow < cols.lo; ++ow) out[ow] = 0.0f;
            if (sw == 1 && cols.hi > cols.lo)
              std::memcpy(out + cols.lo, row + cols.lo + shift,
                          sizeof(float) * static_cast<std::size_t>(cols.hi - cols.lo));
            else
              for (std::ptrdiff_t ow = cols.lo; ow < cols.hi; ++ow) out[ow] = row[ow * sw + shift];
            for (std::ptrdiff_t ow = cols.hi; ow < Wo; ++ow) out[ow] = 0.0f;
          }
        }
      }
    }
  }
}

}  // namespace

Conv2dOp::Conv2dOp(const ComputeContext& ctx, const Conv2dGeometry& geometry, std::size_t max_batch)
    : ctx_(ctx), g_(geometry), max_batch_(max_batch) {
  g_.validate();
  direct_ =
      g_.kh() == 1 && g_.kw() == 1 && g_.sh() == 1 && g_.sw() == 1 && g_.ph() == 0 && g_.pw() == 0;
  if (ctx.is_cuda()) {
    gpu_ = detail::make_gpu_conv_plan(detail::handles_of(ctx), g_, max_batch);
  } else if (!(cpu_ = detail::make_cpu_conv_plan(g_, max_batch))) {
    if (!direct_)
      col_ = Tensor::empty({g_.in_channels * g_.kh() * g_.kw(), g_.out_height() * g_.out_width()},
                           DType::f32, Device::cpu());
    if (g_.layout == Layout::nhwc) {
      sample_in_ =
          Tensor::empty({g_.in_channels * g_.height * g_.width}, DType::f32, Device::cpu());
      sample_out_ = Tensor::empty({g_.out_channels * g_.out_height() * g_.out_width()}, DType::f32,
                                  Device::cpu());
    }
  }
}

Conv2dOp::~Conv2dOp() = default;

std::string Conv2dOp::describe() const {
  if (gpu_) return gpu_->describe();
  if (cpu_) return detail::cpu_conv_backend_name();
  const char* path = direct_ ? "gemm (1x1, no im2col)" : "im2col+gemm";
  return g_.layout == Layout::nhwc ? std::string(path) + ", nhwc transposed per sample" : path;
}

bool Conv2dOp::stores_activations() const {
  return gpu_ && ctx_.precision() != DType::f32 && gpu_->stores_16bit();
}

void Conv2dOp::forward(BufferView x, const float* w, const float* b, BufferView y,
                       std::size_t batch) {
  RT_CHECK(stores_activations(), "conv2d: the stored form runs on a GPU under bf16/fp16 only");
  RT_CHECK(batch <= max_batch_, "conv2d batch {} exceeds the planned maximum {}", batch,
           max_batch_);
  if (batch == 0) return;
  gpu_->forward_stored(x, w, y, batch);
  // The bias is per channel: the pixels of NHWC are rows of [N*H*W, C].
  const std::size_t hwo = g_.out_height() * g_.out_width();
  if (b != nullptr) {
    if (g_.layout == Layout::nhwc)
      bias_add(ctx_, y, b, batch * hwo, g_.out_channels, 1);
    else
      bias_add(ctx_, y, b, batch, g_.out_channels, hwo);
  }
}

void Conv2dOp::backward(BufferView x, const float* w, BufferView dy, BufferView dx, float* dw,
                        float* db, std::size_t batch, bool accumulate) {
  RT_CHECK(stores_activations(), "conv2d: the stored form runs on a GPU under bf16/fp16 only");
  RT_CHECK(batch <= max_batch_, "conv2d batch {} exceeds the planned maximum {}", batch,
           max_batch_);
  const std::size_t hwo = g_.out_height() * g_.out_width();
  if (db != nullptr) {
    if (g_.layout == Layout::nhwc)
      bias_grad(ctx_, dy, db, batch * hwo, g_.out_channels, 1, accumulate);
    else
      bias_grad(ctx_, dy, db, batch, g_.out_channels, hwo, accumulate);
  }
  if (batch == 0) {
    if (!accumulate)
      device_zero(dw, sizeof(float) * g_.out_channels * g_.in_channels * g_.kh() * g_.kw(),
                  ctx_.device());
    return;
  }
  gpu_->backward_filter_stored(x, dy, dw, batch, accumulate);
  if (dx.ptr != nullptr) gpu_->backward_data_stored(w, dy, dx, batch);
}

void Conv2dOp::forward(const float* x, const float* w, const float* b, float* y,
                       std::size_t batch) {
  RT_CHECK(batch <= max_batch_, "conv2d batch {} exceeds the planned maximum {}", batch,
           max_batch_);
  const std::size_t hwo = g_.out_height() * g_.out_width();
  const std::size_t ckk = g_.in_channels * g_.kh() * g_.kw();
  const std::size_t in_size = g_.in_channels * g_.height * g_.width;
  const std::size_t out_size = g_.out_channels * hwo;
  if (batch == 0) return;
  // Under --precision bf16|fp16 the convolution's output is a 16-bit tensor
  // on every device, before any bias: the GPU's cuDNN writes a 16-bit y
  // (and its fp32 fallback rounds), so the CPU rounds here too; the model then
  // stores y + b, rounded once more.
  const DType p = ctx_.precision();
  const bool round_y = p != DType::f32 && !gpu_;
  if (gpu_) {
    gpu_->forward(x, w, y, batch);
  } else if (cpu_) {
    cpu_->forward(x, w, y, batch);
  } else {
    const bool nhwc = g_.layout == Layout::nhwc;
    const std::size_t hw = g_.height * g_.width;
    for (std::size_t n = 0; n < batch; ++n) {
      const float* x_n = x + n * in_size;
      if (nhwc) {
        nhwc_to_nchw(ctx_, x_n, sample_in_.data_as<float>(), 1, g_.in_channels, hw);
        x_n = sample_in_.data_as<float>();
      }
      const float* col = x_n;
      if (!direct_) {
        im2col_walk<false>(g_, const_cast<float*>(x_n), col_.data_as<float>());
        col = col_.data_as<float>();
      }
      float* y_n = nhwc ? sample_out_.data_as<float>() : y + n * out_size;
      gemm(ctx_, false, false, g_.out_channels, hwo, ckk, 1.0f, w, ckk, col, hwo, 0.0f, y_n, hwo);
      if (nhwc) nchw_to_nhwc(ctx_, y_n, y + n * out_size, 1, g_.out_channels, hwo);
    }
  }
  if (round_y) round_to_precision(ctx_, y, y, batch * out_size, p);
  // The bias is per channel: the pixels of NHWC are rows of [N*H*W, C].
  if (b != nullptr) {
    if (g_.layout == Layout::nhwc)
      bias_add(ctx_, y, b, batch * hwo, g_.out_channels, 1);
    else
      bias_add(ctx_, y, b, batch, g_.out_channels, hwo);
  }
}

void Conv2dOp::backward(const float* x, const float* w, const float* dy, float* dx, float* dw,
                        float* db, std::size_t batch, bool accumulate) {
  RT_CHECK(batch <= max_batch_, "conv2d batch {} exceeds the planned maximum {}", batch,
           max_batch_);
  const std::size_t hwo = g_.out_height() * g_.out_width();
  const std::size_t ckk = g_.in_channels * g_.kh() * g_.kw();
  const std::size_t in_size = g_.in_channels * g_.height * g_.width;
  const std::size_t out_size = g_.out_channels * hwo;
  const bool nhwc = g_.layout == Layout::nhwc;
  if (db != nullptr) {
    if (nhwc)
      bias_grad(ctx_, dy, db, batch * hwo, g_.out_channels, 1, accumulate);
    else
      bias_grad(ctx_, dy, db, batch, g_.out_channels, hwo, accumulate);
  }
  if (gpu_) {
    if (batch == 0) {
      if (!accumulate) device_zero(dw, sizeof(float) * g_.out_channels * ckk, ctx_.device());
      return;
    }
    gpu_->backward_filter(x, dy, dw, batch, accumulate);
    if (dx != nullptr) gpu_->backward_data(w, dy, dx, batch);
    return;
  }
  if (batch == 0 && !accumulate) std::memset(dw, 0, sizeof(float) * g_.out_channels * ckk);
  // Under --precision bf16|fp16, dx is a 16-bit tensor on every device, as
  // the GPU's cuDNN writes it: it matters where the model adds another
  // consumer's gradient to it before its own rounding (a residual block's input).
  const DType p = ctx_.precision();
  if (cpu_) {
    if (batch == 0) return;
    cpu_->backward_weights(x, dy, dw, batch, accumulate);
    if (dx != nullptr) {
      cpu_->backward_data(w, dy, dx, batch);
      if (p != DType::f32) round_to_precision(ctx_, dx, dx, batch * in_size, p);
    }
    return;
  }
  float* col = col_.data_as<float>();
  const std::size_t hw = g_.height * g_.width;
  for (std::size_t n = 0; n < batch; ++n) {
    const float* dy_n = dy + n * out_size;
    const float* x_n = x + n * in_size;
    if (nhwc) {
      nhwc_to_nchw(ctx_, dy_n, sample_out_.data_as<float>(), 1, g_.out_channels, hwo);
      nhwc_to_nchw(ctx_, x_n, sample_in_.data_as<float>(), 1, g_.in_channels, hw);
      dy_n = sample_out_.data_as<float>();
      x_n = sample_in_.data_as<float>();
    }
    const float* x_col = x_n;
    if (!direct_) {
      im2col_walk<false>(g_, const_cast<float*>(x_n), col);
      x_col = col;
    }
    const float beta = (n == 0 && !accumulate) ? 0.0f : 1.0f;
    gemm(ctx_, false, true, g_.out_channels, ckk, hwo, 1.0f, dy_n, hwo, x_col, hwo, beta, dw, ckk);
    if (dx == nullptr) continue;
    // NHWC: the sample's NCHW input is spent on dw, and takes its dx.
    float* dx_n = nhwc ? sample_in_.data_as<float>() : dx + n * in_size;
    if (direct_) {
      gemm(ctx_, true, false, ckk, hwo, g_.out_channels, 1.0f, w, ckk, dy_n, hwo, 0.0f, dx_n, hwo);
    } else {
      // The columns are spent on dw; the same block now takes d(columns).
      gemm(ctx_, true, false, ckk, hwo, g_.out_channels, 1.0f, w, ckk, dy_n, hwo, 0.0f, col, hwo);
      std::memset(dx_n, 0, sizeof(float) * in_size);
      im2col_walk<true>(g_, dx_n, col);
    }
    if (nhwc) nchw_to_nhwc(ctx_, dx_n, dx + n * in_size, 1, g_.in_channels, hw);
  }
  if (dx != nullptr && p != DType::f32) round_to_precision(ctx_, dx, dx, batch * in_size, p);
}

}  // namespace ringtrain
