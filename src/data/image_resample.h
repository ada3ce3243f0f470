// Antialiased resizing and the geometry around it. The arithmetic is PIL's
// BILINEAR resample (kernels/image_resample.cuh says how), so a resize here
// gives the bytes that PIL, and torchvision's transforms on PIL images, give.
#pragma once

#include "data/image.h"

namespace ringtrain {

// Resizes `in` (any rectangle: a crop is a view) to out_h x out_w. The view's
// edges are the image's edges: the filter never reads outside it, as after a
// PIL crop.
Image resize_bilinear(const ImageView& in, int out_h, int out_w);
// The same into a caller's buffer of out_h * out_w * channels bytes (HWC),
// using `scratch` for the intermediate row pass.
void resize_bilinear_into(const ImageView& in, int out_h, int out_w, std::uint8_t* out,
                          std::vector<std::uint8_t>& scratch);

// torchvision's Resize(short_side): the short side becomes `short_side`, the
// long side int(short_side * long / short) (truncated, as torchvision does).
void short_side_size(int h, int w, int short_side, int& out_h, int& out_w);

// torchvision's CenterCrop offsets: round((size - crop) / 2) with Python's
// round-half-to-even.
int center_offset(int size, int crop);

}  // namespace ringtrain
