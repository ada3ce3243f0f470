// Decoding through libjpeg (libjpeg-turbo's libjpeg API) and libpng. Both
// report errors by longjmp; the functions that call setjmp touch only plain
// data (the decoder structs and raw output pointers), so no C++ object is
// skipped or left indeterminate by a jump, and errors become exceptions in
// their callers.
#include "data/image_decode.h"

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <fstream>

// jpeglib.h needs size_t and FILE declared before it.
#include <jerror.h>
#include <jpeglib.h>
#include <png.h>

#include "kernels/image_resample.cuh"
#include "ringtrain/core/check.h"

namespace ringtrain {

ImageFormat sniff_image_format(const std::uint8_t* data, std::size_t size) {
  if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF) return ImageFormat::jpeg;
  static const std::uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  if (size >= 8 && std::memcmp(data, png_sig, 8) == 0) return ImageFormat::png;
  return ImageFormat::unknown;
}

std::vector<std::uint8_t> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  RT_CHECK(in.good(), "{}: cannot open: {}", path, std::strerror(errno));
  const std::streamoff size = in.tellg();
  RT_CHECK(size >= 0, "{}: cannot read its size", path);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(size));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  RT_CHECK(in.good() || size == 0, "{}: read error", path);
  return bytes;
}

namespace {

// --- JPEG ------------------------------------------------------------------

struct JpegErrorManager {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErrorManager*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings are ignored as PIL ignores them (extraneous bytes, say), except a
// premature end: libjpeg would fill the rest with gray and go on.
void jpeg_on_message(j_common_ptr c, int level) {
  if (level == -1 && c->err->msg_code == JWRN_JPEG_EOF) jpeg_on_error(c);
}

struct JpegDecoder {
  jpeg_decompress_struct cinfo;
  JpegErrorManager err;
  bool created = false;
  JpegDecoder() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = jpeg_on_error;
    err.pub.emit_message = jpeg_on_message;
    err.message[0] = '\0';
  }
  ~JpegDecoder() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
  JpegDecoder(const JpegDecoder&) = delete;
  JpegDecoder& operator=(const JpegDecoder&) = delete;
};

// Reads the header (and APP1 markers) and, when `start`, begins decompression
// to RGB, gray or CMYK at 1/scale_denom. False on error (err.message says why).
bool jpeg_begin(JpegDecoder& d, const std::uint8_t* data, std::size_t size, int scale_denom,
                bool start) {
  if (setjmp(d.err.jump)) return false;
  jpeg_create_decompress(&d.cinfo);
  d.created = true;
  jpeg_mem_src(&d.cinfo, data, static_cast<unsigned long>(size));
  jpeg_save_markers(&d.cinfo, JPEG_APP0 + 1, 0xFFFF);
  jpeg_read_header(&d.cinfo, TRUE);
  if (!start) return true;
  const J_COLOR_SPACE cs = d.cinfo.jpeg_color_space;
  d.cinfo.out_color_space = cs == JCS_CMYK || cs == JCS_YCCK ? JCS_CMYK
                            : cs == JCS_GRAYSCALE            ? JCS_GRAYSCALE
                                                             : JCS_RGB;
  d.cinfo.scale_num = 1;
  d.cinfo.scale_denom = static_cast<unsigned>(scale_denom);
  jpeg_start_decompress(&d.cinfo);
  return true;
}

bool jpeg_read_rows(JpegDecoder& d, std::uint8_t* out, std::size_t row_bytes) {
  if (setjmp(d.err.jump)) return false;
  while (d.cinfo.output_scanline < d.cinfo.output_height) {
    JSAMPROW row = out + d.cinfo.output_scanline * row_bytes;
    jpeg_read_scanlines(&d.cinfo, &row, 1);
  }
  jpeg_finish_decompress(&d.cinfo);
  return true;
}

// EXIF orientation (tag 0x0112 of IFD0) from an APP1 "Exif" marker: 1..8, or
// 1 when absent or unreadable.
int exif_orientation(const jpeg_decompress_struct& cinfo) {
  for (jpeg_saved_marker_ptr m = cinfo.marker_list; m; m = m->next) {
    if (m->marker != JPEG_APP0 + 1 || m->data_length < 14) continue;
    const std::uint8_t* p = m->data;
    if (std::memcmp(p, "Exif\0\0", 6) != 0) continue;
    const std::uint8_t* t = p + 6;  // TIFF header
    const std::size_t n = m->data_length - 6;
    const bool le = t[0] == 'I' && t[1] == 'I';
    if (!le && !(t[0] == 'M' && t[1] == 'M')) return 1;
    auto u16 = [&](std::size_t at) -> unsigned {
      return le ? t[at] | (t[at + 1] << 8) : (t[at] << 8) | t[at + 1];
    };
    auto u32 = [&](std::size_t at) -> std::size_t {
      return le ? t[at] | (t[at + 1] << 8) | (t[at + 2] << 16) | (std::size_t{t[at + 3]} << 24)
                : (std::size_t{t[at]} << 24) | (t[at + 1] << 16) | (t[at + 2] << 8) | t[at + 3];
    };
    if (u16(2) != 42) return 1;
    const std::size_t ifd = u32(4);
    if (ifd + 2 > n) return 1;
    const unsigned entries = u16(ifd);
    for (unsigned e = 0; e < entries; ++e) {
      const std::size_t at = ifd + 2 + e * 12;
      if (at + 12 > n) return 1;
      if (u16(at) == 0x0112 && u16(at + 2) == 3) {
        const unsigned v = u16(at + 8);
        return v >= 1 && v <= 8 ? static_cast<int>(v) : 1;
      }
    }
  }
  return 1;
}

// --- PNG -------------------------------------------------------------------

struct PngSource {
  const std::uint8_t* data;
  std::size_t size, pos;
};

void png_read_memory(png_structp png, png_bytep out, png_size_t count) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (src->size - src->pos < count) png_error(png, "premature end of file (truncated)");
  std::memcpy(out, src->data + src->pos, count);
  src->pos += count;
}

struct PngErrorMessage {
  char text[256];
};

void png_on_error(png_structp png, png_const_charp msg) {
  auto* m = static_cast<PngErrorMessage*>(png_get_error_ptr(png));
  std::snprintf(m->text, sizeof m->text, "%s", msg);
  png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}

struct PngDecoder {
  png_structp png = nullptr;
  png_infop info = nullptr;
  PngSource src{};
  PngErrorMessage err{};
  int height = 0, width = 0, channels = 0;
  bool colour = false;
  PngDecoder() {
    png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, png_on_error, png_on_warning);
    if (png) info = png_create_info_struct(png);
  }
  ~PngDecoder() {
    if (png) png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
  }
  PngDecoder(const PngDecoder&) = delete;
  PngDecoder& operator=(const PngDecoder&) = delete;
};

// Header, and the transformations to 8-bit gray or RGB without alpha.
bool png_begin(PngDecoder& d, const std::uint8_t* data, std::size_t size) {
  if (!d.png || !d.info) {
    std::snprintf(d.err.text, sizeof d.err.text, "out of memory");
    return false;
  }
  if (setjmp(png_jmpbuf(d.png))) return false;
  d.src = {data, size, 0};
  png_set_read_fn(d.png, &d.src, png_read_memory);
  png_read_info(d.png, d.info);
  const int type = png_get_color_type(d.png, d.info);
  const int depth = png_get_bit_depth(d.png, d.info);
  d.colour = (type & PNG_COLOR_MASK_COLOR) != 0;
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(d.png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(d.png);
  if (depth == 16) png_set_strip_16(d.png);  // the high byte
  if (type & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(d.png);
  png_set_interlace_handling(d.png);
  png_read_update_info(d.png, d.info);
  d.height = static_cast<int>(png_get_image_height(d.png, d.info));
  d.width = static_cast<int>(png_get_image_width(d.png, d.info));
  d.channels = png_get_channels(d.png, d.info);
  return true;
}

bool png_read_rows(PngDecoder& d, png_bytepp rows) {
  if (setjmp(png_jmpbuf(d.png))) return false;
  png_read_image(d.png, rows);
  png_read_end(d.png, nullptr);
  return true;
}

// --- orientation and colour ----------------------------------------------

// Applies EXIF orientation o (2..8) as PIL's ImageOps.exif_transpose does.
Image orient(const Image& in, int o) {
  const bool swap = o >= 5;
  Image out(swap ? in.width : in.height, swap ? in.height : in.width, in.channels);
  const int c = in.channels, H = in.height, W = in.width;
  for (int y = 0; y < out.height; ++y)
    for (int x = 0; x < out.width; ++x) {
      int sy = y, sx = x;
      switch (o) {
        case 2:
          sx = W - 1 - x;
          break;  // mirror
        case 3:
          sy = H - 1 - y;
          sx = W - 1 - x;
          break;  // 180
        case 4:
          sy = H - 1 - y;
          break;  // flip
        case 5:
          sy = x;
          sx = y;
          break;  // transpose
        case 6:
          sy = H - 1 - x;
          sx = y;
          break;  // 90 clockwise
        case 7:
          sy = H - 1 - x;
          sx = W - 1 - y;
          break;  // transverse
        case 8:
          sy = x;
          sx = W - 1 - y;
          break;  // 90 counter-clockwise
        default:
          break;
      }
      std::memcpy(out.row(y) + x * c,
                  in.pixels.data() + (static_cast<std::size_t>(sy) * W + sx) * c,
                  static_cast<std::size_t>(c));
    }
  return out;
}

// Gray, RGB or (Adobe-inverted or plain) CMYK rows to `channels` (1 or 3).
Image to_channels(const Image& in, int channels, bool adobe_cmyk) {
  if (in.channels == channels) return in;
  Image out(in.height, in.width, channels);
  const std::size_t n = static_cast<std::size_t>(in.height) * in.width;
  const std::uint8_t* s = in.pixels.data();
  std::uint8_t* d = out.pixels.data();
  for (std::size_t i = 0; i < n; ++i) {
    std::uint8_t rgb[3];
    if (in.channels == 1) {
      rgb[0] = rgb[1] = rgb[2] = s[i];
    } else if (in.channels == 3) {
      std::memcpy(rgb, s + i * 3, 3);
    } else {
      // PIL's cmyk2rgb: channel = (255 - K) - round(C (255 - K) / 255).
      const std::uint8_t* p = s + i * 4;
      auto v = [&](int k) { return adobe_cmyk ? 255 - p[k] : p[k]; };
      const int nk = 255 - v(3);
      for (int k = 0; k < 3; ++k) {
        const int t = v(k) * nk + 128;
        const int r = nk - (((t >> 8) + t) >> 8);
        rgb[k] = static_cast<std::uint8_t>(r < 0 ? 0 : r);
      }
    }
    if (channels == 3)
      std::memcpy(d + i * 3, rgb, 3);
    else
      d[i] = kernels::rgb_to_luma(rgb[0], rgb[1], rgb[2]);
  }
  return out;
}

Image decode_jpeg(const std::string& path, const std::uint8_t* data, std::size_t size, int channels,
                  int scale_denom) {
  JpegDecoder d;
  RT_CHECK(jpeg_begin(d, data, size, scale_denom, true), "{}: bad JPEG: {}", path, d.err.message);
  // Saved markers live in libjpeg's image pool, which finishing frees.
  const int o = exif_orientation(d.cinfo);
  const int native = d.cinfo.output_components;
  Image img(static_cast<int>(d.cinfo.output_height), static_cast<int>(d.cinfo.output_width),
            native);
  RT_CHECK(native == 1 || native == 3 || native == 4, "{}: JPEG with {} components", path, native);
  RT_CHECK(jpeg_read_rows(d, img.pixels.data(), static_cast<std::size_t>(img.width) * native),
           "{}: bad JPEG: {}", path, d.err.message);
  const bool adobe = d.cinfo.saw_Adobe_marker != 0;
  img = to_channels(img, channels, adobe);
  return o > 1 ? orient(img, o) : img;
}

Image decode_png(const std::string& path, const std::uint8_t* data, std::size_t size,
                 int channels) {
  PngDecoder d;
  RT_CHECK(png_begin(d, data, size), "{}: bad PNG: {}", path, d.err.text);
  RT_CHECK(d.channels == 1 || d.channels == 3, "{}: PNG with {} channels after conversion", path,
           d.channels);
  Image img(d.height, d.width, d.channels);
  std::vector<png_bytep> rows(static_cast<std::size_t>(d.height));
  for (int y = 0; y < d.height; ++y) rows[y] = img.row(y);
  RT_CHECK(png_read_rows(d, rows.data()), "{}: bad PNG: {}", path, d.err.text);
  return to_channels(img, channels, false);
}

}  // namespace

ImageInfo probe_image(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  ImageInfo info;
  switch (sniff_image_format(bytes.data(), bytes.size())) {
    case ImageFormat::jpeg: {
      JpegDecoder d;
      RT_CHECK(jpeg_begin(d, bytes.data(), bytes.size(), 1, false), "{}: bad JPEG: {}", path,
               d.err.message);
      info.height = static_cast<int>(d.cinfo.image_height);
      info.width = static_cast<int>(d.cinfo.image_width);
      info.colour = d.cinfo.jpeg_color_space != JCS_GRAYSCALE;
      const int o = exif_orientation(d.cinfo);
      if (o >= 5) std::swap(info.height, info.width);
      info.format = ImageFormat::jpeg;
      info.plain =
          o == 1 && d.cinfo.jpeg_color_space != JCS_CMYK && d.cinfo.jpeg_color_space != JCS_YCCK;
      return info;
    }
    case ImageFormat::png: {
      PngDecoder d;
      RT_CHECK(png_begin(d, bytes.data(), bytes.size()), "{}: bad PNG: {}", path, d.err.text);
      info.height = d.height;
      info.width = d.width;
      info.colour = d.colour;
      info.format = ImageFormat::png;
      return info;
    }
    case ImageFormat::unknown:
      break;
  }
  RT_CHECK(false, "{}: not a JPEG or PNG file (its first bytes are neither signature)", path);
}

Image decode_image(const std::string& path, const std::vector<std::uint8_t>& bytes, int channels,
                   int scale_denom) {
  return decode_image(path, bytes.data(), bytes.size(), channels, scale_denom);
}

Image decode_image(const std::string& path, const std::uint8_t* data, std::size_t size,
                   int channels, int scale_denom) {
  RT_CHECK(channels == 1 || channels == 3, "{}: cannot decode to {} channels (1 or 3)", path,
           channels);
  switch (sniff_image_format(data, size)) {
    case ImageFormat::jpeg:
      return decode_jpeg(path, data, size, channels, scale_denom);
    case ImageFormat::png:
      return decode_png(path, data, size, channels);
    case ImageFormat::unknown:
      break;
  }
  RT_CHECK(false, "{}: not a JPEG or PNG file (its first bytes are neither signature)", path);
}

}  // namespace ringtrain
