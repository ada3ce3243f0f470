// A decoded image to a stored sample of fixed size: the geometry of
// `convert images --size H,W --fit crop|pad|stretch`, shared with `predict
// --images`, which must give new photos the same treatment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"

namespace ringtrain {

struct ImageGeometry {
  int channels = 3, height = 0, width = 0;
  std::string fit = "crop";  // crop, pad or stretch
};

// Writes the (C, H, W) sample: resized to cover then center-cropped
// (torchvision's Resize + CenterCrop), letterboxed (pad: black borders) or
// stretched; then channels to planes. `scratch` and `sized` are reused buffers.
void fit_image(const Image& img, const ImageGeometry& g, std::uint8_t* out,
               std::vector<std::uint8_t>& scratch, Image& sized);

}  // namespace ringtrain
