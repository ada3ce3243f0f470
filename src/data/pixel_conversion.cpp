#include "data/pixel_conversion.h"

#include "core/multi_isa.h"

namespace ringtrain {

RT_MULTI_ISA
void bytes_to_float(const std::uint8_t* __restrict src, float* __restrict dst, std::size_t n,
                    float scale, float offset) {
  for (std::size_t e = 0; e < n; ++e) dst[e] = static_cast<float>(src[e]) * scale + offset;
}

}  // namespace ringtrain
