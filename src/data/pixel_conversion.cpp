#include "data/pixel_conversion.h"

namespace ringtrain {

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define RT_PIXEL_TARGETS __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define RT_PIXEL_TARGETS
#endif

RT_PIXEL_TARGETS
void bytes_to_float(const std::uint8_t* __restrict src, float* __restrict dst, std::size_t n,
                    float scale, float offset) {
  for (std::size_t e = 0; e < n; ++e) dst[e] = static_cast<float>(src[e]) * scale + offset;
}

}  // namespace ringtrain
