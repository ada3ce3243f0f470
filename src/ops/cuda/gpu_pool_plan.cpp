// Max pooling on a GPU through cuDNN, in its deterministic max mode. The x
// and y descriptors are made once per batch size seen (the first call with a
// new size creates them), so a call only launches. Channels-last activations
// are the same call with CUDNN_TENSOR_NHWC descriptors.
#include <vector>

#include "core/cuda/check_cuda.h"
#include "core/cuda/check_cudnn.h"
#include "ops/gpu_ops.h"

namespace ringtrain::detail {

namespace {

class CudnnPoolPlan final : public GpuPoolPlan {
 public:
  CudnnPoolPlan(const GpuHandles& h, const Pool2dGeometry& g)
      : dnn_(static_cast<cudnnHandle_t>(h.dnn)), g_(g) {
    RT_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&pool_desc_));
    const cudnnPoolingMode_t mode = g.mode == PoolMode::max
                                        ? CUDNN_POOLING_MAX_DETERMINISTIC
                                        : CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    RT_CUDNN_CHECK(cudnnSetPooling2dDescriptor(pool_desc_, mode, CUDNN_NOT_PROPAGATE_NAN,
                                               i(g.kernel), i(g.kernel), i(g.padding), i(g.padding),
                                               i(g.stride), i(g.stride)));
    descs_.reserve(4);
  }
  ~CudnnPoolPlan() override {
    for (const Descs& d : descs_) {
      if (d.y != nullptr) (void)cudnnDestroyTensorDescriptor(d.y);
      if (d.x != nullptr) (void)cudnnDestroyTensorDescriptor(d.x);
    }
    (void)cudnnDestroyPoolingDescriptor(pool_desc_);
  }

  void forward(const float* x, float* y, std::size_t batch) override {
    const Descs& d = descs(batch);
    const float one = 1.0f, zero = 0.0f;
    RT_CUDNN_CHECK(cudnnPoolingForward(dnn_, pool_desc_, &one, d.x, x, &zero, d.y, y));
  }

  void backward(const float* x, const float* y, const float* dy, float* dx,
                std::size_t batch) override {
    const Descs& d = descs(batch);
    const float one = 1.0f, zero = 0.0f;
    RT_CUDNN_CHECK(
        cudnnPoolingBackward(dnn_, pool_desc_, &one, d.y, y, d.y, dy, d.x, x, &zero, d.x, dx));
  }

 private:
  struct Descs {
    std::size_t batch = 0;
    cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  };

  static int i(std::size_t v) { return static_cast<int>(v); }
  cudnnTensorFormat_t format() const {
    return g_.layout == Layout::nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  }

  const Descs& descs(std::size_t batch) {
    for (const Descs& d : descs_)
      if (d.batch == batch) return d;
    descs_.push_back(Descs{batch, nullptr, nullptr});
    Descs& d = descs_.back();
    RT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.x));
    RT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&d.y));
    RT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.x, format(), CUDNN_DATA_FLOAT, i(batch),
                                              i(g_.channels), i(g_.height), i(g_.width)));
    RT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(d.y, format(), CUDNN_DATA_FLOAT, i(batch),
                                              i(g_.channels), i(g_.out_height()),
                                              i(g_.out_width())));
    return d;
  }

  cudnnHandle_t dnn_;
  Pool2dGeometry g_;
  cudnnPoolingDescriptor_t pool_desc_ = nullptr;
  std::vector<Descs> descs_;
};

}  // namespace

std::unique_ptr<GpuPoolPlan> make_gpu_pool_plan(const GpuHandles& h, const Pool2dGeometry& g) {
  return std::make_unique<CudnnPoolPlan>(h, g);
}

}  // namespace ringtrain::detail
