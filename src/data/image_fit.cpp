#include "data/image_fit.h"

#include <algorithm>
#include <cmath>

#include "data/image_resample.h"

namespace ringtrain {

void fit_image(const Image& img, const ImageGeometry& g, std::uint8_t* out,
               std::vector<std::uint8_t>& scratch, Image& sized) {
  const int H = g.height, W = g.width, C = g.channels;
  ImageView v = img.view();
  int top = 0, left = 0;  // where v lands in the output (pad)
  if (img.height != H || img.width != W) {
    if (g.fit == "stretch") {
      sized = Image(H, W, C);
    } else {
      const double sh = static_cast<double>(H) / img.height,
                   sw = static_cast<double>(W) / img.width;
      const double s = g.fit == "pad" ? std::min(sh, sw) : std::max(sh, sw);
      int rh = static_cast<int>(std::lround(img.height * s));
      int rw = static_cast<int>(std::lround(img.width * s));
      if (g.fit == "pad") {
        rh = std::clamp(rh, 1, H);
        rw = std::clamp(rw, 1, W);
      } else {
        rh = std::max(rh, H);
        rw = std::max(rw, W);
      }
      sized = Image(rh, rw, C);
    }
    resize_bilinear_into(v, sized.height, sized.width, sized.pixels.data(), scratch);
    v = sized.view();
  }
  if (g.fit == "pad") {
    top = (H - v.height) / 2;
    left = (W - v.width) / 2;
    std::fill_n(out, static_cast<std::size_t>(C) * H * W, std::uint8_t{0});
  } else {
    v = v.crop(center_offset(v.height, H), center_offset(v.width, W), H, W);
  }
  for (int y = 0; y < v.height; ++y) {
    const std::uint8_t* src = v.row(y);
    for (int x = 0; x < v.width; ++x)
      for (int c = 0; c < C; ++c)
        out[(static_cast<std::size_t>(c) * H + top + y) * W + left + x] = src[x * C + c];
  }
}

}  // namespace ringtrain
