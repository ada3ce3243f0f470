// The vectorised u8 -> f32 conversion behind --cache reads equals the scalar
// formula for every length and alignment (vector bodies, tails, odd starts).
#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "data/pixel_conversion.h"

using namespace ringtrain;

TEST_CASE("bytes_to_float matches x * scale + offset for every length and alignment") {
  const float scale = 1.0f / 255.0f, offset = -0.5f;
  std::vector<std::uint8_t> src(1100);
  for (std::size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<std::uint8_t>((i * 37 + 11) % 256);
  for (std::size_t n : {0, 1, 7, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 784, 1000})
    for (std::size_t shift : {0, 1, 3}) {
      std::vector<float> dst(n + shift + 1, 42.0f);
      bytes_to_float(src.data() + shift, dst.data() + shift, n, scale, offset);
      for (std::size_t i = 0; i < n; ++i) {
        INFO("n " << n << " shift " << shift << " i " << i);
        REQUIRE(dst[shift + i] == static_cast<float>(src[shift + i]) * scale + offset);
      }
      for (std::size_t i = 0; i < shift; ++i) REQUIRE(dst[i] == 42.0f);
      REQUIRE(dst[n + shift] == 42.0f);  // nothing written past the end
    }
}
