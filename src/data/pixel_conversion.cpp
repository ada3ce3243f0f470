#include "data/pixel_conversion.h"

#include "core/multi_isa.h"

namespace ringtrain {

RT_MULTI_ISA
void bytes_to_float(const std::uint8_t* __restrict src, float* __restrict dst, std::size_t n,
                    float scale, float offset) {
  for (std::size_t e = 0; e < n; ++e) dst[e] = kernels::normalize_byte(src[e], scale, offset);
}

void widen_bytes(const std::uint8_t* src, float* dst, std::size_t n,
                 const kernels::ChannelWidening& w) {
  if (w.channels == 1) {
    bytes_to_float(src, dst, n, w.scale[0], w.offset[0]);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) dst[i] = kernels::widen_element(src, i, w);
}

}  // namespace ringtrain
