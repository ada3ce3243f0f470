// Images to JPEG bytes (libjpeg-turbo), for `convert images --store jpeg` when
// the stored image is not the original file: a resized image, a PNG, or a JPEG
// whose colour or orientation had to change.
#pragma once

#include <cstdint>
#include <vector>

#include "data/image.h"

namespace ringtrain {

// 1 (gray) or 3 (RGB) channels; quality 1..100, 4:2:0 chroma as libjpeg's
// default (and PIL's).
std::vector<std::uint8_t> encode_jpeg(const Image& image, int quality);

}  // namespace ringtrain
