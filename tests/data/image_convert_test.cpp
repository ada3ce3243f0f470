// convert images against the references: a Fashion-MNIST PNG tree gives the
// bytes convert idx gives; JPEG decoding and resizing give PIL's bytes (within
// 1) on real photographs; the bad-file folder is named, skipped and counted.
// The fixtures come from make_image_fixtures.py (PIL), in IMAGE_FIXTURES.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "data/device_widening.h"
#include "data/image_decode.h"
#include "data/image_resample.h"
#include "data/pixel_conversion.h"
#include "ringtrain/core/error.h"
#include "ringtrain/data/converters.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/sample_transform.h"

using namespace ringtrain;
using Catch::Contains;

namespace {

std::string fixtures() {
  const char* d = std::getenv("IMAGE_FIXTURES");
  REQUIRE(d != nullptr);
  return d;
}
std::string fx(const std::string& name) {
  return (std::filesystem::path(fixtures()) / name).string();
}
std::string out(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::path(fixtures()) / "out";
  std::filesystem::create_directories(dir);
  std::filesystem::remove(dir / name);
  return (dir / name).string();
}

std::vector<std::uint8_t> bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), {}};
}

int max_diff(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  REQUIRE(a.size() == b.size());
  int m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(int{a[i]} - int{b[i]}));
  return m;
}

std::vector<std::uint8_t> stored(const std::string& path, const std::string& split) {
  Dataset d = Dataset::open(path, split);
  std::vector<std::uint8_t> x(d.size() * d.sample_elements());
  d.read_stored(0, d.size(), x.data());
  return x;
}

ImageConvertOptions quiet(const std::string& train, const std::string& output) {
  ImageConvertOptions o;
  o.train = train;
  o.output = output;
  o.progress = false;
  o.test_fraction = 0.4;  // of the mixed folder's classes: 2 of 5 and 2 of 4 files
  return o;
}

}  // namespace

TEST_CASE("convert images of a Fashion-MNIST PNG tree stores the pixels convert idx stores") {
  ImageConvertOptions o = quiet(fx("fashion/train"), out("fashion-png.h5"));
  o.test = fx("fashion/test");
  const ConvertSummary s = convert_images(o);
  CHECK_THAT(s.text, Contains("/train: 300 images of 1x28x28 uint8, 10 classes"));

  IdxConvertOptions idx;
  const std::string dir = kFashionMnistDir;
  idx.train_images = dir + "/train-images-idx3-ubyte.gz";
  idx.train_labels = dir + "/train-labels-idx1-ubyte.gz";
  idx.test_images = dir + "/t10k-images-idx3-ubyte.gz";
  idx.test_labels = dir + "/t10k-labels-idx1-ubyte.gz";
  idx.output = out("fashion-idx.h5");
  convert_idx(idx);

  for (const auto& [split, count] :
       {std::pair<std::string, std::size_t>{"train", 300}, {"test", 100}}) {
    Dataset png = Dataset::open(o.output, split), ref = Dataset::open(idx.output, split);
    REQUIRE(png.size() == count);
    CHECK(png.sample_shape() == ref.sample_shape());
    CHECK(png.scale() == ref.scale());
    CHECK(png.class_names() ==
          std::vector<std::string>{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"});
    // The tree holds sample i of the IDX file as <label>/<i>.png: class order,
    // then index order.
    std::vector<std::uint64_t> order;
    for (std::int32_t c = 0; c < 10; ++c)
      for (std::uint64_t i = 0; i < count; ++i)
        if (ref.labels()[i] == c) order.push_back(i);
    REQUIRE(order.size() == count);
    const std::vector<std::uint8_t> got = stored(o.output, split), all = stored(idx.output, split);
    const std::size_t e = png.sample_elements();
    for (std::size_t k = 0; k < count; ++k) {
      INFO(split << " sample " << k << " = IDX sample " << order[k]);
      CHECK(png.labels()[k] == ref.labels()[order[k]]);
      CHECK(std::equal(got.begin() + k * e, got.begin() + (k + 1) * e, all.begin() + order[k] * e));
    }
  }
}

TEST_CASE("the number of workers does not change the file") {
  ImageConvertOptions o = quiet(fx("mixed"), out("w1.h5"));
  o.height = 40;
  o.width = 40;
  o.skip_bad = true;
  o.workers = 1;
  convert_images(o);
  o.workers = 4;
  o.output = out("w4.h5");
  convert_images(o);
  CHECK(stored(fx("out/w1.h5"), "train") == stored(fx("out/w4.h5"), "train"));
  CHECK(stored(fx("out/w1.h5"), "test") == stored(fx("out/w4.h5"), "test"));
}

TEST_CASE("JPEG decoding matches PIL's on real photographs") {
  for (const std::string name : {"china", "flower"}) {
    INFO(name);
    const std::string path = fx("photos/" + name + ".jpg");
    const std::vector<std::uint8_t> file = read_file_bytes(path);
    const Image rgb = decode_image(path, file, 3);
    CHECK(rgb.height == 427);
    CHECK(rgb.width == 640);
    CHECK(max_diff(rgb.pixels, bytes_of(fx("photos/" + name + ".rgb.bin"))) <= 1);
    const Image gray = decode_image(path, file, 1);
    CHECK(max_diff(gray.pixels, bytes_of(fx("photos/" + name + ".l.bin"))) <= 1);
  }
}

TEST_CASE("the antialiased resize matches PIL's BILINEAR resize") {
  for (const std::string name : {"china", "flower"}) {
    const std::string path = fx("photos/" + name + ".jpg");
    const Image rgb = decode_image(path, read_file_bytes(path), 3);
    for (const auto& [h, w] : {std::pair{224, 224}, {97, 131}, {480, 700}}) {
      INFO(name << " to " << h << "x" << w);
      const Image r = resize_bilinear(rgb.view(), h, w);
      CHECK(max_diff(r.pixels,
                     bytes_of(fx(fmt::format("photos/{}.resize-{}x{}.bin", name, h, w)))) <= 1);
    }
    // torchvision's Resize(256) + CenterCrop(224) geometry.
    int h = 0, w = 0;
    short_side_size(rgb.height, rgb.width, 256, h, w);
    const Image r = resize_bilinear(rgb.view(), h, w);
    const Image c = resize_bilinear(
        r.view().crop(center_offset(h, 224), center_offset(w, 224), 224, 224), 224, 224);
    CHECK(max_diff(c.pixels, bytes_of(fx("photos/" + name + ".eval224.bin"))) <= 1);
    // RandomResizedCrop's geometry for chosen parameters: crop, then resize.
    const Image rrc = resize_bilinear(rgb.view().crop(37, 51, 200, 300), 224, 224);
    CHECK(max_diff(rrc.pixels, bytes_of(fx("photos/" + name + ".rrc224.bin"))) <= 1);
    // The loader's transform works on C x H x W planes: the same bytes.
    const std::size_t hw = static_cast<std::size_t>(rgb.height) * rgb.width;
    std::vector<std::uint8_t> planes(hw * 3);
    for (std::size_t p = 0; p < hw; ++p)
      for (int k = 0; k < 3; ++k) planes[k * hw + p] = rgb.pixels[p * 3 + k];
    const auto eval = SampleTransform::parse("resize(256), center_crop(224)", 0);
    const std::vector<std::size_t> shape{3, static_cast<std::size_t>(rgb.height),
                                         static_cast<std::size_t>(rgb.width)};
    std::vector<float> x(3 * 224 * 224);
    eval->apply(planes.data(), shape, 1.0f, 0.0f, 0, 0, x.data());
    const std::vector<std::uint8_t> ref = bytes_of(fx("photos/" + name + ".eval224.bin"));
    int worst = 0;
    for (int k = 0; k < 3; ++k)
      for (std::size_t p = 0; p < 224 * 224; ++p)
        worst =
            std::max(worst, std::abs(static_cast<int>(x[k * 224 * 224 + p]) - int{ref[p * 3 + k]}));
    CHECK(worst <= 1);
  }
}

TEST_CASE("CMYK, EXIF-rotated, gray, RGBA and 16-bit files decode as PIL shows them") {
  auto decode = [](const std::string& rel, int channels) {
    const std::string path = fx(rel);
    return decode_image(path, read_file_bytes(path), channels);
  };
  CHECK(max_diff(decode("mixed/a_photos/good.jpg", 3).pixels, bytes_of(fx("mixed-good.rgb.bin"))) <=
        1);
  CHECK(max_diff(decode("mixed/a_photos/cmyk.jpg", 3).pixels, bytes_of(fx("mixed-cmyk.rgb.bin"))) <=
        1);
  const Image rotated = decode("mixed/a_photos/rotated.jpg", 3);
  CHECK(rotated.height == 48);
  CHECK(rotated.width == 64);
  CHECK(max_diff(rotated.pixels, bytes_of(fx("mixed-rotated.rgb.bin"))) <= 1);
  CHECK(decode("mixed/b_pngs/gray.png", 3).pixels == bytes_of(fx("mixed-gray.rgb.bin")));
  CHECK(decode("mixed/b_pngs/rgba.png", 3).pixels == decode("mixed/b_pngs/rgb.png", 3).pixels);
  CHECK(decode("mixed/b_pngs/gray16.png", 1).pixels == decode("mixed/b_pngs/gray.png", 1).pixels);
  const std::string info_path = fx("mixed/a_photos/rotated.jpg");
  const ImageInfo info = probe_image(info_path, read_file_bytes(info_path));
  CHECK((info.height == 48 && info.width == 64 && info.colour));
  CHECK_THROWS_WITH(decode("mixed/a_photos/truncated.jpg", 3),
                    Contains("truncated.jpg: bad JPEG: Premature end of JPEG file"));
  CHECK_THROWS_WITH(decode("mixed/a_photos/notes.jpg", 3),
                    Contains("notes.jpg: not a JPEG or PNG"));
}

TEST_CASE("bad files are named, or skipped and counted; empty classes and overwrites refused") {
  ImageConvertOptions o = quiet(fx("mixed"), out("mixed.h5"));
  o.height = 32;
  o.width = 32;
  CHECK_THROWS_WITH(
      convert_images(o),
      Contains("mixed/a_photos/notes.jpg: not a JPEG or PNG file") && Contains("--skip-bad"));
  CHECK_FALSE(std::filesystem::exists(o.output));
  CHECK_FALSE(std::filesystem::exists(o.output + ".tmp"));
  o.skip_bad = true;
  const ConvertSummary s = convert_images(o);
  INFO(s.text);
  // a_photos: good, cmyk, rotated (+ truncated, notes skipped); b_pngs: 4 PNGs.
  CHECK_THAT(s.text, Contains("skipped 2 unreadable image(s); ignored 1 file(s)"));
  Dataset train = Dataset::open(o.output, "train"), test = Dataset::open(o.output, "test");
  CHECK(train.size() + test.size() == 7);
  CHECK(train.sample_shape() == std::vector<std::size_t>{3, 32, 32});
  CHECK(train.class_names() == std::vector<std::string>{"a_photos", "b_pngs"});

  CHECK_THROWS_WITH(convert_images(o), Contains("mixed.h5 already exists: pass --force"));
  // The shared output guard: an image of the tree is an input even with
  // --force, and is left as it was.
  ImageConvertOptions onto = o;
  onto.output = fx("mixed") + "/b_pngs/rgb.png";
  onto.force = true;
  const auto before = std::filesystem::file_size(onto.output);
  CHECK_THROWS_WITH(convert_images(onto), Contains("b_pngs/rgb.png is also the input image") &&
                                              Contains("even with --force"));
  CHECK(std::filesystem::file_size(onto.output) == before);
  onto.output = fx("mixed");
  CHECK_THROWS_WITH(convert_images(onto), Contains("is also the input --train"));
  o.force = true;
  o.channels = 1;
  convert_images(o);
  CHECK(Dataset::open(o.output, "train").sample_shape() == std::vector<std::size_t>{1, 32, 32});

  ImageConvertOptions e = quiet(fx("empty"), out("empty.h5"));
  CHECK_THROWS_WITH(convert_images(e),
                    Contains("class folder") && Contains("empty/b holds no .jpg"));
  // Without --size raw storage needs one size: images of several are
  // refused before anything is written, each size named with its count and
  // an example.
  ImageConvertOptions sizes = quiet(fx("sizes"), out("sizes.h5"));
  sizes.test = fx("sizes");
  // (Catch2 v2's combined matchers hold their parts by reference: spelled out
  // in each check.)
  CHECK_THROWS_WITH(convert_images(sizes),
                    Contains("the images have 2 different sizes (HxW)") &&
                        Contains("2 of 48x64 (e.g. ") && Contains("sizes/a/x.png)") &&
                        Contains("2 of 32x32 (e.g. ") && Contains("sizes/b/y.png)") &&
                        Contains("Give --size H,W"));
  // --skip-bad skips unreadable images, never one of another size: it once
  // kept 12 of 215 photos, calling the other 203 "unreadable".
  sizes.skip_bad = true;
  CHECK_THROWS_WITH(convert_images(sizes),
                    Contains("the images have 2 different sizes (HxW)") &&
                        Contains("2 of 48x64 (e.g. ") && Contains("2 of 32x32 (e.g. ") &&
                        Contains("--skip-bad skips unreadable images, never a size"));
  CHECK_FALSE(std::filesystem::exists(sizes.output));
}

TEST_CASE("--fit pad letterboxes, stretch fills, crop covers") {
  for (const std::string fit : {"pad", "stretch", "crop"}) {
    INFO(fit);
    ImageConvertOptions p = quiet(fx("mixed"), out(fit + ".h5"));
    p.height = 64;
    p.width = 64;
    p.fit = fit;
    p.skip_bad = true;
    convert_images(p);
    Dataset d = Dataset::open(p.output, "train");
    std::vector<std::uint8_t> x(d.sample_elements());
    d.read_stored(0, 1, x.data());  // a_photos/cmyk.jpg, 48x64
    // pad: 48x64 fits 64x64 unscaled, 8 black rows above and below.
    int black_rows = 0;
    for (int y = 0; y < 64; ++y) {
      bool black = true;
      for (int c = 0; c < 3; ++c)
        for (int col = 0; col < 64; ++col) black = black && x[(c * 64 + y) * 64 + col] == 0;
      black_rows += black;
    }
    CHECK(black_rows == (fit == "pad" ? 16 : 0));
  }
}

TEST_CASE("--store jpeg keeps plain JPEG files as they are and decodes on read") {
  // Raw and JPEG stores of the same folder, images at their own size (48x64).
  ImageConvertOptions raw = quiet(fx("mixed"), out("store-raw.h5"));
  raw.skip_bad = true;
  raw.channels = 3;
  convert_images(raw);
  ImageConvertOptions jpg = raw;
  jpg.output = out("store-jpeg.h5");
  jpg.store = "jpeg";
  const ConvertSummary s = convert_images(jpg);
  CHECK_THAT(s.text, Contains("3-channel JPEG of their own sizes"));

  for (const std::string split : {"train", "test"}) {
    Dataset r = Dataset::open(raw.output, split), j = Dataset::open(jpg.output, split);
    REQUIRE(r.size() == j.size());
    CHECK(j.labels() == r.labels());
    CHECK(j.class_names() == r.class_names());
    // Images of varying size need a transform that fixes the size.
    CHECK(j.sample_shape() == std::vector<std::size_t>{3, 0, 0});
    std::vector<std::uint64_t> idx(j.size());
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
    std::vector<float> xr(r.size() * r.sample_elements());
    CHECK_THROWS_WITH(j.read(idx, xr.data(), nullptr),
                      Contains("images of varying size need a transform"));
    j.set_transform(SampleTransform::parse("center_crop((48,64))", 0), 3);
    REQUIRE(j.sample_shape() == r.sample_shape());
    std::vector<float> xj(xr.size());
    r.read(idx, xr.data(), nullptr);
    j.read(idx, xj.data(), nullptr);
    const std::size_t e = r.sample_elements();
    for (std::size_t i = 0; i < idx.size(); ++i) {
      double sum = 0;
      for (std::size_t k = 0; k < e; ++k) sum += std::abs(xr[i * e + k] - xj[i * e + k]);
      const double mean_abs = sum / static_cast<double>(e) * 255.0;
      INFO(split << " sample " << i << ": mean |raw - jpeg| = " << mean_abs << " levels");
      // good.jpg (the first sample of class a_photos in whichever split) is the
      // original file, so exact; re-encoded images (CMYK, rotated, PNGs) are
      // close: quality 90 on these small detailed photos costs ~4 levels.
      CHECK(mean_abs < 6.0);
    }
  }
  // The file of a plain JPEG is stored byte for byte: the exact decode.
  Dataset j = Dataset::open(jpg.output, "train"), r = Dataset::open(raw.output, "train");
  j.set_transform(SampleTransform::parse("center_crop((48,64))", 0));
  std::size_t exact = 0;
  for (std::uint64_t i = 0; i < j.size(); ++i) {
    std::vector<float> a(r.sample_elements()), b(r.sample_elements());
    r.read(std::span(&i, 1), a.data(), nullptr);
    j.read(std::span(&i, 1), b.data(), nullptr);
    exact += a == b;
  }
  CHECK(exact >= 1);

  // With --size, JPEGs are re-encoded at that size and read without a transform.
  const std::string own_sizes = jpg.output;
  jpg.output = out("store-jpeg-32.h5");
  jpg.height = jpg.width = 32;
  convert_images(jpg);
  Dataset fixed = Dataset::open(jpg.output, "train");
  CHECK(fixed.sample_shape() == std::vector<std::size_t>{3, 32, 32});
  std::vector<float> x(fixed.size() * fixed.sample_elements());
  std::vector<std::uint64_t> all(fixed.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  fixed.read(all, x.data(), nullptr);
  CHECK(*std::max_element(x.begin(), x.end()) > 0.5f);
  CHECK_THROWS_WITH(fixed.read_stored(0, 1, x.data()), Contains("encoded images"));

  // A GPU rank's loader: the decoded (and transformed) bytes and the widening
  // the device applies give read()'s floats bit for bit, without a transform
  // and with one that normalises per channel (tests/data/device_widening_test
  // covers raw storage).
  Dataset varying = Dataset::open(own_sizes, "train");
  varying.set_transform(
      SampleTransform::parse("random_resized_crop(24), hflip, normalize(mean=(0.5,0.4,0.3), "
                             "std=(0.25,0.2,0.3))",
                             7),
      2);
  for (Dataset* d : {&fixed, &varying}) {
    REQUIRE(d->reads_bytes());
    const auto w = device_widening(*d);
    REQUIRE(w.has_value());
    const std::vector<std::uint64_t> idx{2, 0, 1, 2};
    const std::size_t n = idx.size() * d->sample_elements();
    std::vector<float> want(n), got(n);
    std::vector<std::uint8_t> bytes(n);
    d->read(idx, want.data(), nullptr, 3);
    d->read_bytes(idx, bytes.data(), nullptr, 3);
    widen_bytes(bytes.data(), got.data(), n, *w);
    CHECK(std::memcmp(got.data(), want.data(), n * sizeof(float)) == 0);
  }
}

TEST_CASE("--short-side and --max-side shrink JPEG-stored images, never enlarge") {
  ImageConvertOptions o = quiet(fx("mixed"), out("short-side.h5"));
  o.skip_bad = true;
  o.store = "jpeg";
  o.short_side = 24;  // 48x64 -> 24x32
  convert_images(o);
  Dataset d = Dataset::open(o.output, "train");
  std::vector<std::uint64_t> idx(d.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  d.set_transform(SampleTransform::parse("center_crop((24,32))", 0));
  std::vector<float> x(d.size() * d.sample_elements());
  CHECK_NOTHROW(d.read(idx, x.data(), nullptr));
  d.set_transform(SampleTransform::parse("center_crop(25)", 0));
  CHECK_THROWS_WITH(d.read(idx, x.data(), nullptr), Contains("center_crop(25) of a 24x32 image"));

  o.output = out("max-side.h5");
  o.short_side = 100;  // above every image: no change from it
  o.max_side = 40;     // 48x64 -> 30x40
  convert_images(o);
  Dataset m = Dataset::open(o.output, "train");
  m.set_transform(SampleTransform::parse("center_crop((30,40))", 0));
  x.resize(m.size() * m.sample_elements());
  CHECK_NOTHROW(m.read(idx, x.data(), nullptr));
  m.set_transform(SampleTransform::parse("center_crop((31,40))", 0));
  CHECK_THROWS_WITH(m.read(idx, x.data(), nullptr), Contains("of a 30x40 image"));

  ImageConvertOptions raw = quiet(fx("mixed"), out("short-raw.h5"));
  raw.short_side = 24;
  CHECK_THROWS_WITH(convert_images(raw), Contains("need --store jpeg"));
}
