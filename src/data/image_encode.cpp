// libjpeg reports errors by longjmp: the function that calls setjmp touches
// only the compressor struct and raw pointers (see image_decode.cpp).
#include "data/image_encode.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>

#include <jpeglib.h>

#include "ringtrain/core/check.h"

namespace ringtrain {
namespace {

struct EncodeError {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void encode_on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<EncodeError*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

struct Encoder {
  jpeg_compress_struct cinfo;
  EncodeError err;
  unsigned char* out = nullptr;
  unsigned long size = 0;
  bool created = false;
  Encoder() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = encode_on_error;
    err.message[0] = '\0';
  }
  ~Encoder() {
    if (created) jpeg_destroy_compress(&cinfo);
    std::free(out);  // jpeg_mem_dest allocates with malloc
  }
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;
};

bool run_encoder(Encoder& e, const Image& img, int quality) {
  if (setjmp(e.err.jump)) return false;
  jpeg_create_compress(&e.cinfo);
  e.created = true;
  jpeg_mem_dest(&e.cinfo, &e.out, &e.size);
  e.cinfo.image_width = static_cast<JDIMENSION>(img.width);
  e.cinfo.image_height = static_cast<JDIMENSION>(img.height);
  e.cinfo.input_components = img.channels;
  e.cinfo.in_color_space = img.channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&e.cinfo);
  jpeg_set_quality(&e.cinfo, quality, TRUE);
  jpeg_start_compress(&e.cinfo, TRUE);
  const std::size_t stride = static_cast<std::size_t>(img.width) * img.channels;
  while (e.cinfo.next_scanline < e.cinfo.image_height) {
    // libjpeg's row type is not const, but it only reads the rows.
    JSAMPROW row = const_cast<JSAMPROW>(img.pixels.data() + e.cinfo.next_scanline * stride);
    jpeg_write_scanlines(&e.cinfo, &row, 1);
  }
  jpeg_finish_compress(&e.cinfo);
  return true;
}

}  // namespace

std::vector<std::uint8_t> encode_jpeg(const Image& image, int quality) {
  RT_CHECK(image.channels == 1 || image.channels == 3, "JPEG encoding of {} channels",
           image.channels);
  RT_CHECK(quality >= 1 && quality <= 100, "JPEG quality {} outside 1..100", quality);
  Encoder e;
  RT_CHECK(run_encoder(e, image, quality), "JPEG encoding failed: {}", e.err.message);
  return {e.out, e.out + e.size};
}

}  // namespace ringtrain
