// RT_CHECK and RT_CHECK_EQ: throw ringtrain::Error with file:line and a
// formatted message. (Kept apart from error.h so that nvcc-compiled kernels,
// which cannot include fmt, can still use the Error types.)
#pragma once

#include <fmt/format.h>

#include "ringtrain/core/error.h"

// RT_CHECK(cond, "format {}", args...) throws ringtrain::Error with file:line.
#define RT_CHECK(cond, ...)                                                                    \
  do {                                                                                         \
    if (!(cond))                                                                               \
      ::ringtrain::detail::throw_check_failed(__FILE__, __LINE__, ::fmt::format(__VA_ARGS__)); \
  } while (0)

// RT_CHECK_EQ(a, b, "context") prints both values, as GLOO_ENFORCE_EQ does.
#define RT_CHECK_EQ(a, b, context)                                                              \
  do {                                                                                          \
    const auto& rt_a_ = (a);                                                                    \
    const auto& rt_b_ = (b);                                                                    \
    if (!(rt_a_ == rt_b_))                                                                      \
      ::ringtrain::detail::throw_check_failed(                                                  \
          __FILE__, __LINE__,                                                                   \
          ::fmt::format("{}: expected {} == {}, got {} vs {}", context, #a, #b, rt_a_, rt_b_)); \
  } while (0)
