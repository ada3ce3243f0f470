// Check macros for the CUDA runtime, and the one way to poll the device. Each
// check throws a LibraryError with file:line and the runtime's own error
// string; main() turns it into fatal(), which aborts live NCCL communicators
// before MPI_Abort. NCCL, cuBLAS and cuDNN have a check header each
// (check_nccl.h, check_cublas.h, check_cudnn.h), so a kernel pulls in only the
// CUDA runtime. Internal: only code under */cuda/ and kernels/ includes these.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "ringtrain/core/error.h"

#define RT_CUDA_CHECK(call)                                                                 \
  do {                                                                                      \
    cudaError_t rt_e_ = (call);                                                             \
    if (rt_e_ != cudaSuccess)                                                               \
      ::ringtrain::detail::throw_library_error(                                             \
          "CUDA", __FILE__, __LINE__, std::string(#call ": ") + cudaGetErrorString(rt_e_)); \
  } while (0)

// After every kernel launch, as llm.c does. It cannot report a poll's "not
// ready": polls go through cuda_poll_* below, which clear it.
#define RT_CUDA_CHECK_LAUNCH() RT_CUDA_CHECK(cudaGetLastError())

namespace ringtrain::detail {

// The one way to poll the device. cudaEventQuery and cudaStreamQuery answer
// "not yet" with cudaErrorNotReady, and the runtime also records that as the
// thread's last error: the next RT_CUDA_CHECK_LAUNCH() would report it as the
// launch's failure ("device not ready"). PyTorch clears it for the same reason.
// True when done; false when not yet (error cleared); throws on a real error.
inline bool cuda_poll_result(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  throw_library_error("CUDA", __FILE__, __LINE__, std::string(what) + ": " + cudaGetErrorString(e));
}
inline bool cuda_poll_event(cudaEvent_t e) {
  return cuda_poll_result(cudaEventQuery(e), "cudaEventQuery");
}
inline bool cuda_poll_stream(cudaStream_t s) {
  return cuda_poll_result(cudaStreamQuery(s), "cudaStreamQuery");
}

}  // namespace ringtrain::detail
