// RT_HD marks arithmetic that runs on both sides: nvcc compiles it for the GPU
// kernels, g++ compiles the same function for the CPU path, so CPU tests cover
// the math the GPU runs.
#pragma once

#if defined(__CUDACC__)
#define RT_HD __host__ __device__ __forceinline__
#else
#define RT_HD inline
#endif
