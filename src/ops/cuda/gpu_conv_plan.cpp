// Conv2d on a GPU through cuDNN. Algorithms are chosen once, by cuDNN's
// heuristics, for the maximum batch, and the workspace is sized for them then.
// A smaller batch reuses the algorithm when its workspace fits, and otherwise
// falls back to the implicit GEMM variant, which needs none; so the hot loop
// never allocates.
#include <algorithm>
#include <array>

#include "core/cuda/check_cuda.h"
#include "ops/gpu_ops.h"
#include "ringtrain/tensor/tensor.h"

namespace ringtrain::detail {

namespace {

class CudnnConvPlan final : public GpuConvPlan {
 public:
  CudnnConvPlan(const GpuHandles& h, const Conv2dGeometry& g, std::size_t max_batch)
      : dnn_(static_cast<cudnnHandle_t>(h.dnn)), g_(g) {
    RT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&x_desc_));
    RT_CUDNN_CHECK(cudnnCreateTensorDescriptor(&y_desc_));
    RT_CUDNN_CHECK(cudnnCreateFilterDescriptor(&w_desc_));
    RT_CUDNN_CHECK(cudnnCreateConvolutionDescriptor(&conv_desc_));
    RT_CUDNN_CHECK(cudnnSetFilter4dDescriptor(w_desc_, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW,
                                              i(g.out_channels), i(g.in_channels), i(g.kernel),
                                              i(g.kernel)));
    RT_CUDNN_CHECK(cudnnSetConvolution2dDescriptor(conv_desc_, i(g.padding), i(g.padding),
                                                   i(g.stride), i(g.stride), 1, 1,
                                                   CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
    // FMA only: the default would let Ampere and later run TF32 tensor cores
    // (10-bit mantissa), and the GPU would no longer match its CPU twin.
    RT_CUDNN_CHECK(cudnnSetConvolutionMathType(conv_desc_, CUDNN_FMA_MATH));
    const std::size_t plan_batch = std::max<std::size_t>(max_batch, 1);
    set_batch(plan_batch);
    choose_algorithms();
    std::size_t fwd = 0, bwd_filter = 0, bwd_data = 0;
    RT_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(dnn_, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                           fwd_algo_, &fwd));
    RT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(
        dnn_, x_desc_, y_desc_, conv_desc_, w_desc_, bwd_filter_algo_, &bwd_filter));
    RT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(dnn_, w_desc_, y_desc_, conv_desc_,
                                                                x_desc_, bwd_data_algo_, &bwd_data));
    workspace_bytes_ = std::max({fwd, bwd_filter, bwd_data});
    int ordinal = 0;
    RT_CUDA_CHECK(cudaGetDevice(&ordinal));
    if (workspace_bytes_ > 0)
      // Bytes rounded up to whole floats: the tensor counts elements.
      workspace_ = Tensor::empty({(workspace_bytes_ + 3) / 4}, DType::f32,
                                 Device::cuda(ordinal));
  }

  ~CudnnConvPlan() override {
    (void)cudnnDestroyConvolutionDescriptor(conv_desc_);
    (void)cudnnDestroyFilterDescriptor(w_desc_);
    (void)cudnnDestroyTensorDescriptor(y_desc_);
    (void)cudnnDestroyTensorDescriptor(x_desc_);
  }

  void forward(const float* x, const float* w, float* y, std::size_t batch) override {
    set_batch(batch);
    cudnnConvolutionFwdAlgo_t algo = fwd_algo_;
    std::size_t need = 0;
    RT_CUDNN_CHECK(cudnnGetConvolutionForwardWorkspaceSize(dnn_, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                           algo, &need));
    if (need > workspace_bytes_) algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    const float one = 1.0f, zero = 0.0f;
    RT_CUDNN_CHECK(cudnnConvolutionForward(dnn_, &one, x_desc_, x, w_desc_, w, conv_desc_, algo,
                                           workspace_.data(), workspace_bytes_, &zero, y_desc_, y));
  }

  void backward_filter(const float* x, const float* dy, float* dw, std::size_t batch,
                       bool accumulate) override {
    set_batch(batch);
    cudnnConvolutionBwdFilterAlgo_t algo = bwd_filter_algo_;
    std::size_t need = 0;
    RT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterWorkspaceSize(dnn_, x_desc_, y_desc_, conv_desc_,
                                                                  w_desc_, algo, &need));
    if (need > workspace_bytes_) algo = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0;
    const float one = 1.0f, beta = accumulate ? 1.0f : 0.0f;
    RT_CUDNN_CHECK(cudnnConvolutionBackwardFilter(dnn_, &one, x_desc_, x, y_desc_, dy, conv_desc_, algo,
                                                  workspace_.data(), workspace_bytes_, &beta, w_desc_,
                                                  dw));
  }

  void backward_data(const float* w, const float* dy, float* dx, std::size_t batch) override {
    set_batch(batch);
    cudnnConvolutionBwdDataAlgo_t algo = bwd_data_algo_;
    std::size_t need = 0;
    RT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataWorkspaceSize(dnn_, w_desc_, y_desc_, conv_desc_,
                                                                x_desc_, algo, &need));
    if (need > workspace_bytes_) algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_0;
    const float one = 1.0f, zero = 0.0f;
    RT_CUDNN_CHECK(cudnnConvolutionBackwardData(dnn_, &one, w_desc_, w, y_desc_, dy, conv_desc_, algo,
                                                workspace_.data(), workspace_bytes_, &zero, x_desc_, dx));
  }

 private:
  static int i(std::size_t v) { return static_cast<int>(v); }

  // Descriptors are host-side structs: re-describing them per call is cheap
  // and allocates nothing.
  void set_batch(std::size_t batch) {
    RT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(x_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(batch),
                                              i(g_.in_channels), i(g_.height), i(g_.width)));
    RT_CUDNN_CHECK(cudnnSetTensor4dDescriptor(y_desc_, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, i(batch),
                                              i(g_.out_channels), i(g_.out_height()), i(g_.out_width())));
  }

  void choose_algorithms() {
    int returned = 0;
    std::array<cudnnConvolutionFwdAlgoPerf_t, 8> fwd{};
    RT_CUDNN_CHECK(cudnnGetConvolutionForwardAlgorithm_v7(dnn_, x_desc_, w_desc_, conv_desc_, y_desc_,
                                                          i(fwd.size()), &returned, fwd.data()));
    fwd_algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    for (int r = 0; r < returned; ++r)
      if (fwd[r].status == CUDNN_STATUS_SUCCESS && fwd[r].determinism == CUDNN_DETERMINISTIC) {
        fwd_algo_ = fwd[r].algo;
        break;
      }
    std::array<cudnnConvolutionBwdFilterAlgoPerf_t, 8> bf{};
    RT_CUDNN_CHECK(cudnnGetConvolutionBackwardFilterAlgorithm_v7(dnn_, x_desc_, y_desc_, conv_desc_,
                                                                 w_desc_, i(bf.size()), &returned,
                                                                 bf.data()));
    bwd_filter_algo_ = CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1;
    for (int r = 0; r < returned; ++r)
      if (bf[r].status == CUDNN_STATUS_SUCCESS && bf[r].determinism == CUDNN_DETERMINISTIC) {
        bwd_filter_algo_ = bf[r].algo;
        break;
      }
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, 8> bd{};
    RT_CUDNN_CHECK(cudnnGetConvolutionBackwardDataAlgorithm_v7(dnn_, w_desc_, y_desc_, conv_desc_,
                                                               x_desc_, i(bd.size()), &returned,
                                                               bd.data()));
    bwd_data_algo_ = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
    for (int r = 0; r < returned; ++r)
      if (bd[r].status == CUDNN_STATUS_SUCCESS && bd[r].determinism == CUDNN_DETERMINISTIC) {
        bwd_data_algo_ = bd[r].algo;
        break;
      }
  }

  cudnnHandle_t dnn_;
  Conv2dGeometry g_;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t fwd_algo_{};
  cudnnConvolutionBwdFilterAlgo_t bwd_filter_algo_{};
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_{};
  std::size_t workspace_bytes_ = 0;
  Tensor workspace_;
};

}  // namespace

std::unique_ptr<GpuConvPlan> make_gpu_conv_plan(const GpuHandles& h, const Conv2dGeometry& g,
                                                std::size_t max_batch) {
  return std::make_unique<CudnnConvPlan>(h, g, max_batch);
}

}  // namespace ringtrain::detail
