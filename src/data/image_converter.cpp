// convert images: an ImageFolder tree of JPEG and PNG files to /train and
// /test of uint8 (C, H, W) samples.
//
//   scan folders -> [probe headers: channels, size] -> for each slab of files:
//     workers decode + fit into the slab (in parallel) -> append in order
//
// The slab bounds memory (slab x H x W x C bytes, plus one decoded image per
// worker), whatever the number of images.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <thread>

#include "data/image_decode.h"
#include "data/image_encode.h"
#include "data/image_fit.h"
#include "data/image_folder.h"
#include "data/image_resample.h"
#include "data/random.h"
#include "ringtrain/core/check.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/data/converters.h"
#include "ringtrain/data/dataset_writer.h"
#include "ringtrain/data/output_guard.h"

namespace ringtrain {

namespace fs = std::filesystem;

namespace {

// A line on stderr at most once a second: images, rate and time left.
class ImageProgress {
 public:
  ImageProgress(std::string label, std::size_t total, bool enabled)
      : label_(std::move(label)), total_(total), enabled_(enabled) {}
  void update(std::size_t done) {
    if (!enabled_ || (done < total_ && since_.seconds() < 1.0)) return;
    since_.reset();
    const double t = elapsed_.seconds();
    const double rate = t > 0 ? static_cast<double>(done) / t : 0.0;
    const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0.0;
    std::fprintf(stderr, "convert: %s %zu/%zu images (%.0f%%), %.0f images/s, ETA %.0f s\n",
                 label_.c_str(), done, total_,
                 total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0,
                 rate, eta);
    std::fflush(stderr);
  }

 private:
  std::string label_;
  std::size_t total_;
  bool enabled_;
  Stopwatch since_, elapsed_;
};

// Runs f(worker, i) for i in [0, n) on `workers` threads (worker in
// [0, workers)); f must not throw.
template <typename F>
void parallel_for(std::size_t n, int workers, F&& f) {
  std::atomic<std::size_t> next{0};
  auto work = [&](int worker) {
    for (std::size_t i; (i = next.fetch_add(1)) < n;) f(worker, i);
  };
  std::vector<std::thread> threads;
  const int used = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(workers), n));
  for (int t = 1; t < used; ++t) threads.emplace_back(work, t);
  work(0);
  for (std::thread& t : threads) t.join();
}

struct SplitResult {
  std::vector<std::size_t> per_class;
  std::size_t written = 0, skipped = 0, bytes = 0;
};

SplitResult write_split(DatasetWriter& writer, const char* name,
                        const std::vector<ImageFile>& files,
                        const std::vector<std::string>& classes, const ImageGeometry& g,
                        const ImageConvertOptions& o, int workers) {
  SplitSpec spec;
  spec.name = name;
  spec.n = files.size();
  spec.sample_shape = {static_cast<std::size_t>(g.channels), static_cast<std::size_t>(g.height),
                       static_cast<std::size_t>(g.width)};
  spec.dtype = SampleDType::u8;
  spec.num_classes = static_cast<int>(classes.size());
  spec.class_names = classes;
  spec.scale = 1.0f / 255.0f;
  spec.offset = 0.0f;
  spec.may_end_short = o.skip_bad;
  const bool jpeg = o.store == "jpeg";
  if (jpeg) spec.encoding = "jpeg";
  writer.begin_split(spec);

  const std::size_t sample = static_cast<std::size_t>(g.channels) * g.height * g.width;
  // About 64 MiB of samples per slab (raw), and enough files to keep every
  // worker busy; JPEG slabs hold byte strings, a few hundred KiB each at most.
  const std::size_t slab = jpeg ? std::max<std::size_t>(256, 4u * workers)
                                : std::clamp<std::size_t>((64u << 20) / sample, 4u * workers, 4096);
  std::vector<std::uint8_t> x(jpeg ? 0 : slab * sample);
  std::vector<std::vector<std::uint8_t>> encoded(jpeg ? slab : 0);
  std::vector<std::int32_t> y(slab);
  std::vector<std::string> errors(slab);
  std::vector<char> other_size(slab);  // an error that --skip-bad must not skip
  struct WorkerScratch {
    std::vector<std::uint8_t> resample, planes;
    Image sized;
  };
  std::vector<WorkerScratch> scratch(static_cast<std::size_t>(workers));
  SplitResult r;
  r.per_class.assign(classes.size(), 0);
  ImageProgress progress(name, files.size(), o.progress);
  for (std::size_t begin = 0; begin < files.size(); begin += slab) {
    const std::size_t count = std::min(slab, files.size() - begin);
    parallel_for(count, workers, [&](int me, std::size_t i) {
      const ImageFile& f = files[begin + i];
      errors[i].clear();
      other_size[i] = 0;
      try {
        std::vector<std::uint8_t> bytes = read_file_bytes(f.path);
        const Image img = decode_image(f.path, bytes, g.channels);
        if (o.height == 0 && !jpeg && (img.height != g.height || img.width != g.width)) {
          other_size[i] = 1;  // it reads: not a case for --skip-bad
          RT_CHECK(false,
                   "{}: {}x{} pixels, but the first image is {}x{}: the sizes differ; give "
                   "--size H,W to resize them all",
                   f.path, img.height, img.width, g.height, g.width);
        }
        if (!jpeg) {
          fit_image(img, g, x.data() + i * sample, scratch[me].resample, scratch[me].sized);
        } else if (o.height == 0) {
          // --short-side / --max-side: a scale that fits both, never above 1.
          double shrink = 1.0;
          const int short_in = std::min(img.height, img.width);
          const int long_in = std::max(img.height, img.width);
          if (o.short_side > 0) shrink = std::min(shrink, double(o.short_side) / short_in);
          if (o.max_side > 0) shrink = std::min(shrink, double(o.max_side) / long_in);
          if (shrink < 1.0) {
            const int h = std::max(1, static_cast<int>(std::lround(img.height * shrink)));
            const int w = std::max(1, static_cast<int>(std::lround(img.width * shrink)));
            encoded[i] = encode_jpeg(resize_bilinear(img.view(), h, w), o.quality);
          } else {
            // The original file when it decodes to the stored channels as it
            // is (no CMYK, no EXIF rotation, no colour change); else re-encoded.
            const ImageInfo info = probe_image(f.path, bytes);
            const bool keep =
                info.format == ImageFormat::jpeg && info.plain && info.colour == (g.channels == 3);
            encoded[i] = keep ? std::move(bytes) : encode_jpeg(img, o.quality);
          }
        } else {
          WorkerScratch& w = scratch[me];
          w.planes.resize(sample);
          fit_image(img, g, w.planes.data(), w.resample, w.sized);
          Image fitted(g.height, g.width, g.channels);
          const std::size_t hw = static_cast<std::size_t>(g.height) * g.width;
          for (std::size_t p = 0; p < hw; ++p)
            for (int c = 0; c < g.channels; ++c)
              fitted.pixels[p * g.channels + c] = w.planes[c * hw + p];
          encoded[i] = encode_jpeg(fitted, o.quality);
        }
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
    // Append in file order; a bad file ends the conversion, or is skipped.
    std::size_t kept = 0;
    for (std::size_t i = 0; i < count; ++i) {
      if (!errors[i].empty()) {
        if (other_size[i]) throw Error(errors[i]);
        if (!o.skip_bad) throw Error(errors[i] + " (pass --skip-bad to skip unreadable images)");
        std::fprintf(stderr, "convert: skipped %s\n", errors[i].c_str());
        ++r.skipped;
        continue;
      }
      if (jpeg) {
        r.bytes += encoded[i].size();
        if (kept != i) encoded[kept] = std::move(encoded[i]);
      } else if (kept != i) {
        std::copy_n(x.data() + i * sample, sample, x.data() + kept * sample);
      }
      y[kept] = files[begin + i].label;
      ++r.per_class[static_cast<std::size_t>(y[kept])];
      ++kept;
    }
    if (jpeg)
      writer.append_encoded(encoded, y.data(), kept);
    else
      writer.append(x.data(), y.data(), kept);
    r.written += kept;
    progress.update(begin + count);
  }
  RT_CHECK(r.written > 0, "{}: every image of the {} split was unreadable", o.train, name);
  writer.end_split();
  return r;
}

// Raw storage holds one size. Without --size, images of several sizes are
// refused before anything is written, naming the sizes: --skip-bad once
// dropped every image that differed from the first as "unreadable" (203 of
// 215 photos), which they are not.
void refuse_mixed_sizes(const std::vector<ImageFile>& all, const std::vector<ImageInfo>& info,
                        const std::vector<std::string>& errors, const ImageConvertOptions& o) {
  struct SizeCount {
    int height, width;
    std::size_t count, first;  // images of this size, and the first one's index
  };
  std::vector<SizeCount> sizes;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (!errors[i].empty()) continue;
    auto it = std::find_if(sizes.begin(), sizes.end(), [&](const SizeCount& c) {
      return c.height == info[i].height && c.width == info[i].width;
    });
    if (it == sizes.end())
      sizes.push_back({info[i].height, info[i].width, 1, i});
    else
      ++it->count;
  }
  if (sizes.size() <= 1) return;
  std::stable_sort(sizes.begin(), sizes.end(),
                   [](const SizeCount& a, const SizeCount& b) { return a.count > b.count; });
  std::string listed;
  const std::size_t shown = std::min<std::size_t>(sizes.size(), 4);
  for (std::size_t k = 0; k < shown; ++k)
    listed += fmt::format("{}{} of {}x{} (e.g. {})", k ? ", " : "", sizes[k].count, sizes[k].height,
                          sizes[k].width, all[sizes[k].first].path);
  if (shown < sizes.size()) listed += fmt::format(", and {} other sizes", sizes.size() - shown);
  throw Error(fmt::format(
      "{}: the images have {} different sizes (HxW), and --store raw stores one: {}. Give "
      "--size H,W to resize them all (--fit {}), or --store jpeg to keep each image's own "
      "size{}",
      o.train, sizes.size(), listed, o.fit,
      o.skip_bad ? "; --skip-bad skips unreadable images, never a size that differs" : ""));
}

std::string class_counts(const std::vector<std::string>& classes,
                         const std::vector<std::size_t>& n) {
  std::string s;
  for (std::size_t c = 0; c < classes.size(); ++c)
    s += fmt::format("{}{} {}", c ? ", " : "", classes[c], n[c]);
  return s;
}

}  // namespace

ConvertSummary convert_images(const ImageConvertOptions& o) {
  RT_CHECK(o.fit == "crop" || o.fit == "pad" || o.fit == "stretch",
           "--fit '{}': expected crop, pad or stretch", o.fit);
  RT_CHECK(o.channels == 0 || o.channels == 1 || o.channels == 3, "--channels {}: expected 1 or 3",
           o.channels);
  RT_CHECK((o.height == 0) == (o.width == 0), "--size: give both H and W");
  RT_CHECK(o.store == "raw" || o.store == "jpeg", "--store '{}': expected raw or jpeg", o.store);
  RT_CHECK((o.short_side == 0 && o.max_side == 0) || (o.store == "jpeg" && o.height == 0),
           "--short-side and --max-side keep images at their own sizes: they need --store jpeg "
           "and no --size");
  // The shared guard first, before any scan or decode (an existing output, or
  // an output that is one of the folders).
  guard_output(o.output, {{"--train", o.train}, {"--test", o.test}}, o.force);
  const ImageFolder train = scan_image_folder(o.train);
  ImageFolder test;
  std::vector<ImageFile> train_files;
  if (!o.test.empty()) {
    test = scan_image_folder(o.test, &train.class_names);
    train_files = train.files;
  } else {
    RT_CHECK(o.test_fraction > 0.0 && o.test_fraction < 1.0,
             "--test-fraction {}: expected a fraction in (0, 1) when there is no --test folder",
             o.test_fraction);
    // Per class, a seeded choice of round(fraction x n) files; both splits
    // stay in path order.
    std::vector<std::vector<std::size_t>> by_class(train.class_names.size());
    for (std::size_t i = 0; i < train.files.size(); ++i)
      by_class[static_cast<std::size_t>(train.files[i].label)].push_back(i);
    std::vector<bool> held(train.files.size(), false);
    for (std::size_t c = 0; c < by_class.size(); ++c) {
      std::vector<std::size_t>& v = by_class[c];
      data_random::Xoshiro256 rng(o.seed, c);
      for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
      const auto k = static_cast<std::size_t>(std::lround(o.test_fraction * v.size()));
      for (std::size_t i = 0; i < std::min(k, v.size() - 1); ++i) held[v[i]] = true;
    }
    for (std::size_t i = 0; i < train.files.size(); ++i)
      (held[i] ? test.files : train_files).push_back(train.files[i]);
    RT_CHECK(!test.files.empty(),
             "--test-fraction {} of {} images holds out none: raise it or give --test",
             o.test_fraction, train.files.size());
  }
  // With --force, an existing output may still be one of the images.
  std::error_code exists_ec;
  if (fs::exists(o.output, exists_ec)) {
    std::vector<GuardedInput> images;
    for (const std::vector<ImageFile>* f : {&train_files, &test.files})
      for (const ImageFile& file : *f) images.push_back({"image", file.path});
    guard_output(o.output, images, o.force);
  }

  const int workers = o.workers > 0
                          ? o.workers
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  ImageGeometry g;
  g.channels = o.channels;
  g.height = o.height;
  g.width = o.width;
  g.fit = o.fit;
  if (g.channels == 0 || g.height == 0) {
    // Headers only: whether any image has colour, and the first image's size.
    std::vector<ImageFile> all = train_files;
    all.insert(all.end(), test.files.begin(), test.files.end());
    std::vector<ImageInfo> info(all.size());
    std::vector<std::string> errors(all.size());
    parallel_for(all.size(), workers, [&](int, std::size_t i) {
      try {
        info[i] = probe_image(all[i].path, read_file_bytes(all[i].path));
      } catch (const std::exception& e) {
        errors[i] = e.what();
      }
    });
    bool colour = false, sized = false;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (!errors[i].empty()) {
        if (!o.skip_bad) throw Error(errors[i] + " (pass --skip-bad to skip unreadable images)");
        continue;  // the decoding pass names and counts it
      }
      colour = colour || info[i].colour;
      if (!sized) {
        sized = true;
        if (g.height == 0 && o.store == "raw") {
          g.height = info[i].height;
          g.width = info[i].width;
        }
      }
    }
    RT_CHECK(sized, "{}: no readable image", o.train);
    if (o.height == 0 && o.store == "raw") refuse_mixed_sizes(all, info, errors, o);
    if (g.channels == 0) g.channels = colour ? 3 : 1;
  }

  DatasetWriter writer(o.output);
  const SplitResult tr =
      write_split(writer, "train", train_files, train.class_names, g, o, workers);
  const SplitResult te = write_split(writer, "test", test.files, train.class_names, g, o, workers);
  writer.commit();

  auto shape = [&](const SplitResult& r) {
    if (o.store == "raw") return fmt::format("{}x{}x{} uint8", g.channels, g.height, g.width);
    if (g.height > 0)
      return fmt::format("{}x{}x{} JPEG (quality {}, {:.1f} MiB)", g.channels, g.height, g.width,
                         o.quality, static_cast<double>(r.bytes) / 1048576.0);
    return fmt::format("{}-channel JPEG of their own sizes ({:.1f} MiB)", g.channels,
                       static_cast<double>(r.bytes) / 1048576.0);
  };
  ConvertSummary s;
  s.text += fmt::format("/train: {} images of {}, {} classes ({})\n", tr.written, shape(tr),
                        train.class_names.size(), class_counts(train.class_names, tr.per_class));
  s.text += fmt::format(
      "/test: {} images of {} ({}{})\n", te.written, shape(te),
      class_counts(train.class_names, te.per_class),
      o.test.empty() ? fmt::format("; held out {} of each class, seed {}", o.test_fraction, o.seed)
                     : "");
  s.text += fmt::format(
      "skipped {} unreadable image(s); ignored {} file(s) that are not .jpg, "
      ".jpeg or .png\n",
      tr.skipped + te.skipped, train.ignored + test.ignored);
  s.text += "value = byte * 1/255 (unit normalisation; the loader's normalize() sets mean/std)\n";
  return s;
}

}  // namespace ringtrain
