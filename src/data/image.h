// A decoded image in memory: 8-bit, interleaved channels (HWC, as decoders
// produce it), and a view of a rectangle of one, which crops without copying.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringtrain {

struct ImageView {
  const std::uint8_t* data = nullptr;  // pixel (0, 0)
  int height = 0, width = 0, channels = 0;
  std::ptrdiff_t row_stride = 0;  // bytes between rows (>= width * channels)

  const std::uint8_t* row(int y) const { return data + y * row_stride; }
  // Rows [y, y + h) and columns [x, x + w): the caller keeps it inside.
  ImageView crop(int y, int x, int h, int w) const {
    return {data + y * row_stride + static_cast<std::ptrdiff_t>(x) * channels, h, w, channels,
            row_stride};
  }
};

struct Image {
  int height = 0, width = 0, channels = 0;
  std::vector<std::uint8_t> pixels;  // height * width * channels, HWC

  Image() = default;
  Image(int h, int w, int c)
      : height(h), width(w), channels(c), pixels(static_cast<std::size_t>(h) * w * c) {}
  std::uint8_t* row(int y) {
    return pixels.data() + static_cast<std::size_t>(y) * width * channels;
  }
  ImageView view() const {
    return {pixels.data(), height, width, channels, static_cast<std::ptrdiff_t>(width) * channels};
  }
};

}  // namespace ringtrain
