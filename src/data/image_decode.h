// JPEG (libjpeg-turbo) and PNG (libpng) files to 8-bit images, with the
// conventions of PIL's Image.open(path).convert(mode), so that a converted set
// holds the bytes torchvision's ImageFolder would see, except where noted:
//   - colour: grayscale is replicated to RGB; RGB becomes gray by PIL's
//     ITU-R 601-2 luma; alpha is dropped (not composited), as PIL does;
//   - CMYK and YCCK JPEGs become RGB by PIL's formula, with Adobe's inverted
//     CMYK undone first;
//   - 16-bit PNGs keep their high byte (PIL does so for RGB; for 16-bit gray
//     PIL clips the value at 255 instead, which whitens most images);
//   - EXIF orientation is applied (PIL leaves it to ImageOps.exif_transpose);
//   - a truncated JPEG is an error (libjpeg would pad it with gray).
// Every error names the file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image.h"

namespace ringtrain {

enum class ImageFormat { jpeg, png, unknown };
// From the first bytes (signature), not the extension.
ImageFormat sniff_image_format(const std::uint8_t* data, std::size_t size);

struct ImageInfo {
  int height = 0, width = 0;  // after EXIF orientation
  bool colour = false;        // RGB, palette, CMYK or YCCK (not gray)
  ImageFormat format = ImageFormat::unknown;
  bool plain = false;  // a JPEG that decodes to gray or RGB as stored (no CMYK, no rotation)
};

// Reads the header only. Throws Error naming `path`.
ImageInfo probe_image(const std::string& path, const std::vector<std::uint8_t>& bytes);

// Decodes to `channels` (1 or 3). Throws Error naming `path` on a corrupt,
// truncated or unsupported file. `scale_denom` (1, 2, 4 or 8) lets libjpeg
// decode a JPEG at 1/denom size in the DCT domain (ignored for PNG).
Image decode_image(const std::string& path, const std::vector<std::uint8_t>& bytes, int channels,
                   int scale_denom = 1);
Image decode_image(const std::string& path, const std::uint8_t* data, std::size_t size,
                   int channels, int scale_denom = 1);

// The whole file; throws Error naming it when it cannot be read.
std::vector<std::uint8_t> read_file_bytes(const std::string& path);

}  // namespace ringtrain
