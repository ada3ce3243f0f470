// Check macros for the CUDA runtime, NCCL, cuBLAS and cuDNN. Each throws a
// LibraryError with file:line and the library's own error string; main() turns
// it into fatal(), which aborts live NCCL communicators before MPI_Abort.
// Internal: only code under */cuda/ and kernels/ includes this.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>
#include <nccl.h>

#include <string>

#include "ringtrain/core/error.h"

#define RT_CUDA_CHECK(call)                                                          \
  do {                                                                               \
    cudaError_t rt_e_ = (call);                                                      \
    if (rt_e_ != cudaSuccess)                                           \
      ::ringtrain::detail::throw_library_error("CUDA", __FILE__, __LINE__,           \
                                               std::string(#call ": ") +             \
                                                   cudaGetErrorString(rt_e_));       \
  } while (0)

// After every kernel launch, as llm.c does.
#define RT_CUDA_CHECK_LAUNCH() RT_CUDA_CHECK(cudaGetLastError())

#define RT_NCCL_CHECK(call)                                                          \
  do {                                                                               \
    ncclResult_t rt_r_ = (call);                                                     \
    if (rt_r_ != ncclSuccess && rt_r_ != ncclInProgress)                \
      ::ringtrain::detail::throw_library_error("NCCL", __FILE__, __LINE__,           \
                                               std::string(#call ": ") +             \
                                                   ncclGetErrorString(rt_r_));       \
  } while (0)

#define RT_CUBLAS_CHECK(call)                                                        \
  do {                                                                               \
    cublasStatus_t rt_s_ = (call);                                                   \
    if (rt_s_ != CUBLAS_STATUS_SUCCESS)                                 \
      ::ringtrain::detail::throw_library_error("cuBLAS", __FILE__, __LINE__,         \
                                               std::string(#call ": ") +             \
                                                   cublasGetStatusString(rt_s_));    \
  } while (0)

#define RT_CUDNN_CHECK(call)                                                         \
  do {                                                                               \
    cudnnStatus_t rt_s_ = (call);                                                    \
    if (rt_s_ != CUDNN_STATUS_SUCCESS)                                  \
      ::ringtrain::detail::throw_library_error("cuDNN", __FILE__, __LINE__,          \
                                               std::string(#call ": ") +             \
                                                   cudnnGetErrorString(rt_s_));      \
  } while (0)
