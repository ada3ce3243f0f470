// RT_MULTI_ISA: compile a hot loop for AVX-512, AVX2 and the SSE2 baseline and
// let the loader pick the widest the CPU has (GCC target clones, resolved once
// through an ifunc). The binary stays runnable on any x86-64; elsewhere, or
// with another compiler, it is a plain function.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__CUDACC__)
#define RT_MULTI_ISA __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RT_MULTI_ISA
#endif
