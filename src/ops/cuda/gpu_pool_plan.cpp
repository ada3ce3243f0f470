// Max pooling on a GPU through cuDNN, in its deterministic max mode.
#include "core/cuda/check_cuda.h"
#include "ops/gpu_ops.h"

namespace ringtrain::detail {

namespace {

class CudnnPoolPlan final : public GpuPoolPlan {
 public:
  CudnnPoolPlan(const GpuHandles& h, const MaxPool2dGeometry& g)
      : dnn_(static_cast<cudnnHandle_t>(h.dnn)), g_(g) {
    RT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_desc_));
    RT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_desc_));
    RT_CUDNN_CHECK(cudnnCreatePoolingDescriptor(&pool_desc_));
    RT_CUDNN_CHECK(cudnnSetPooling2dDescriptor(pool_desc_, CUDNN_POOLING_MAX_DETERMINISTIC,
                                               CUDNN_NOT_PROPAGATE_NAN, i(g.kernel), i(g.kernel), 0, 0,
                                               i(g.stride), i(g.stride)));
  }
  ~CudnnPoolPlan() override {
    (void)cudnnDestroyPoolingDescriptor(pool_desc_);
    (void)cudnnDestroyTensorDescriptor(y_desc_);
    (void)cudnnDestroyTensorDescriptor(x_desc_);
  }

  void forward(const float* x, float* y, std::size_t batch) override {
    set_batch(batch);
    const float one = 1.0f, zero = 0.0f;
    RT_CUDNN_CHECK(cudnnPoolingForward(dnn_, pool_desc_, &one, x_desc_, x, &zero, y_desc_, y));
  }

  void backward(const float* x, const float* y, const float* dy, float* dx, std::size_t batch) override {
    set_batch(batch);
    const float one = 1.0f, zero = 0.0f;
    RT_CUDNN_CHECK(cudnnPoolingBackward(dnn_, pool_desc_, &one, y_desc_, y, y_desc_, dy, x_desc_, x,
                                        &zero, x_desc_, dx));
  }

 private:
  static int i(std::size_t v) { return static_cast<int>(v); }
  void set_batch(std::size_t batch) {
    RT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(batch),
                                              i(g_.channels), i(g_.height), i(g_.width)));
    RT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(batch),
                                              i(g_.channels), i(g_.out_height()), i(g_.out_width())));
  }

  cudnnHandle_t dnn_;
  MaxPool2dGeometry g_;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnPoolingDescriptor_t pool_desc_ = nullptr;
};

}  // namespace

std::unique_ptr<GpuPoolPlan> make_gpu_pool_plan(const GpuHandles& h, const MaxPool2dGeometry& g) {
  return std::make_unique<CudnnPoolPlan>(h, g);
}

}  // namespace ringtrain::detail
