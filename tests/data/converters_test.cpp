// convert idx / csv / synthetic: IDX round trips are byte-exact (gzipped and
// not, and on the real Fashion-MNIST where installed); CSV keeps every value;
// synthetic sets are reproducible from the seed and learnable.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <string>

#include "ringtrain/core/error.h"
#include "ringtrain/data/converters.h"
#include "ringtrain/data/dataset.h"
#include "ringtrain/data/idx_file.h"
#include "ringtrain/data/output_guard.h"
#include "tests/support/read_file.h"

using namespace ringtrain;
using Catch::Contains;

namespace {
// Emptied once per run: converters refuse to replace an earlier run's files.
std::string dir() {
  static const std::string p = [] {
    const char* d = std::getenv("RINGTRAIN_TEST_DATA_DIR");
    const std::string path = std::string(d ? d : ".") + "/converters";
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
    return path;
  }();
  return p;
}
// (std::filesystem::path: GCC 12 warns falsely on string + in some inlines.)
std::string at(const std::string& name) {
  return (std::filesystem::path(dir()) / name).string();
}

IdxArray images(std::size_t n, std::size_t h, std::size_t w, unsigned salt) {
  IdxArray a;
  a.type = IdxType::u8;
  a.dims = {n, h, w};
  a.data.resize(n * h * w);
  for (std::size_t i = 0; i < a.data.size(); ++i)
    a.data[i] = static_cast<unsigned char>((i * 31 + salt + i / 7) & 0xFF);
  return a;
}

IdxArray labels(std::size_t n, unsigned classes, unsigned salt) {
  IdxArray a;
  a.type = IdxType::u8;
  a.dims = {n};
  for (std::size_t i = 0; i < n; ++i)
    a.data.push_back(static_cast<unsigned char>((i * 5 + salt) % classes));
  return a;
}

// Stored bytes and labels of a split equal the IDX source exactly.
void check_split_equals(const std::string& h5, const std::string& split, const IdxArray& img,
                        const IdxArray& lab) {
  Dataset ds = Dataset::open(h5, split);
  REQUIRE(ds.size() == img.dims[0]);
  REQUIRE(ds.stored_dtype() == SampleDType::u8);
  REQUIRE(ds.sample_shape() == std::vector<std::size_t>{1, img.dims[1], img.dims[2]});
  std::vector<unsigned char> stored(img.data.size());
  ds.read_stored(0, ds.size(), stored.data());
  CHECK(stored == img.data);
  for (std::size_t i = 0; i < ds.size(); ++i) REQUIRE(ds.labels()[i] == lab.data[i]);
  // And the floats are byte * scale + offset.
  // Through both read paths: direct offsets (chunked, unfiltered) and HDF5 hyperslabs.
  REQUIRE(ds.direct_reads());
  std::vector<std::uint64_t> idx = {ds.size() - 1, 0};
  std::vector<float> x(2 * ds.sample_elements());
  ds.read(idx, x.data(), nullptr);
  std::vector<std::uint64_t> every(ds.size());
  for (std::size_t i = 0; i < every.size(); ++i) every[i] = (i * 7919) % every.size();
  std::vector<float> direct(every.size() * ds.sample_elements()), hdf5(direct.size());
  ds.read(every, direct.data(), nullptr);
  ds.use_hdf5_reads();
  ds.read(every, hdf5.data(), nullptr);
  REQUIRE(direct == hdf5);
  for (std::size_t e = 0; e < ds.sample_elements(); ++e) {
    REQUIRE(x[e] ==
            static_cast<float>(stored[(ds.size() - 1) * ds.sample_elements() + e]) * ds.scale() +
                ds.offset());
    REQUIRE(x[ds.sample_elements() + e] ==
            static_cast<float>(stored[e]) * ds.scale() + ds.offset());
  }
}
}  // namespace

TEST_CASE("IDX files round-trip, gzipped and not") {
  for (bool gzip : {false, true}) {
    CAPTURE(gzip);
    const std::string ext = gzip ? ".gz" : "";
    const auto tri = images(37, 5, 3, 1), til = labels(37, 4, 2), tei = images(11, 5, 3, 9),
               tel = labels(11, 4, 3);
    IdxConvertOptions o;
    o.train_images = at("train-img" + ext);
    o.train_labels = at("train-lab" + ext);
    o.test_images = at("test-img" + ext);
    o.test_labels = at("test-lab" + ext);
    write_idx(o.train_images, tri, gzip);
    write_idx(o.train_labels, til, gzip);
    write_idx(o.test_images, tei, gzip);
    write_idx(o.test_labels, tel, gzip);
    // read_idx itself round-trips.
    const IdxArray back = read_idx(o.train_images);
    CHECK(back.dims == tri.dims);
    CHECK(back.data == tri.data);
    o.output = at("small" + ext + ".h5");
    o.class_names = "north,east,south,west";
    convert_idx(o);
    check_split_equals(o.output, "train", tri, til);
    check_split_equals(o.output, "test", tei, tel);
    Dataset ds = Dataset::open(o.output, "train");
    CHECK(ds.num_classes() == 4);
    CHECK(ds.class_names() == std::vector<std::string>{"north", "east", "south", "west"});
    CHECK(ds.scale() == 1.0f / 255.0f);
    CHECK(!std::filesystem::exists(o.output + ".tmp"));
  }
}

TEST_CASE("IDX: wider label types, standard normalisation, bad files") {
  IdxConvertOptions o;
  o.train_images = at("w-train-img");
  o.train_labels = at("w-train-lab");
  o.test_images = at("w-test-img");
  o.test_labels = at("w-test-lab");
  const auto tri = images(20, 2, 2, 4);
  write_idx(o.train_images, tri, false);
  write_idx(o.test_images, images(6, 2, 2, 5), false);
  IdxArray l32;
  l32.type = IdxType::i32;
  l32.dims = {20};
  for (int i = 0; i < 20; ++i)
    for (int b = 0; b < 4; ++b) l32.data.push_back(b == 0 ? static_cast<unsigned char>(i % 3) : 0);
  write_idx(o.train_labels, l32, true);
  write_idx(o.test_labels, labels(6, 3, 0), false);
  o.output = at("wide.h5");
  o.normalize = "standard";
  convert_idx(o);
  Dataset ds = Dataset::open(o.output, "train");
  CHECK(ds.num_classes() == 3);
  for (int i = 0; i < 20; ++i) CHECK(ds.labels()[static_cast<std::size_t>(i)] == i % 3);
  // Standardised: the training set has mean ~0 and std ~1.
  std::vector<std::uint64_t> all(20);
  std::iota(all.begin(), all.end(), std::uint64_t{0});
  std::vector<float> x(20 * 4);
  ds.read(all, x.data(), nullptr);
  double sum = 0, sq = 0;
  for (float v : x) sum += v, sq += static_cast<double>(v) * v;
  CHECK(std::abs(sum / 80) < 1e-4);
  CHECK(std::abs(sq / 80 - 1.0) < 1e-3);

  // Labels count differs from images; a truncated file; a bad magic (the
  // output exists by now: these are about the inputs).
  o.force = true;
  write_idx(o.test_labels, labels(5, 3, 0), false);
  CHECK_THROWS_WITH(convert_idx(o), Contains("has 6 images but") && Contains("has 5 labels"));
  {
    std::ofstream f(at("cut"), std::ios::binary);
    const unsigned char head[] = {0, 0, 8, 1, 0, 0, 0, 100, 1, 2, 3};
    f.write(reinterpret_cast<const char*>(head), sizeof head);
  }
  CHECK_THROWS_WITH(read_idx(at("cut")),
                    Contains("truncated: the header promises 100 bytes") && Contains("has 3"));
  {
    std::ofstream f(at("magic"), std::ios::binary);
    f << "PK\x03\x04garbage";
  }
  CHECK_THROWS_WITH(read_idx(at("magic")), Contains("bad magic"));
  CHECK_THROWS_WITH(read_idx(at("none")), Contains("does not exist"));
}

TEST_CASE("the real Fashion-MNIST round-trips byte-exact") {
  const std::string src = kFashionMnistDir;
  // Debian's dataset-fashion-mnist, which launch/install-deps.sh installs
  // (image_convert_test reads it too): missing, the test fails, not passes.
  INFO("Fashion-MNIST is not in " << src
                                  << ": install Debian's dataset-fashion-mnist "
                                     "(launch/install-deps.sh)");
  REQUIRE(std::filesystem::exists(src + "/train-images-idx3-ubyte.gz"));
  IdxConvertOptions o;
  o.train_images = src + "/train-images-idx3-ubyte.gz";
  o.train_labels = src + "/train-labels-idx1-ubyte.gz";
  o.test_images = src + "/t10k-images-idx3-ubyte.gz";
  o.test_labels = src + "/t10k-labels-idx1-ubyte.gz";
  o.output = at("fashion.h5");
  convert_idx(o);
  check_split_equals(o.output, "train", read_idx(o.train_images), read_idx(o.train_labels));
  check_split_equals(o.output, "test", read_idx(o.test_images), read_idx(o.test_labels));
  Dataset ds = Dataset::open(o.output, "test");
  CHECK(ds.size() == 10000);
  CHECK(ds.class_names() == fashion_mnist_class_names());
}

TEST_CASE("CSV: label column by name or index, header detection, holdout, errors") {
  const std::string csv = at("t.csv");
  {
    std::ofstream f(csv);
    f << "f0,label,f1\n";
    for (int i = 0; i < 50; ++i) f << (i * 0.5) << "," << (i % 3) << "," << (-i) << "\n";
  }
  CsvConvertOptions o;
  o.train = csv;
  o.output = at("csv.h5");
  o.label_column = "label";
  o.test_fraction = 0.2;
  convert_csv(o);
  Dataset tr = Dataset::open(o.output, "train"), te = Dataset::open(o.output, "test");
  CHECK(tr.size() == 40);
  CHECK(te.size() == 10);
  CHECK(tr.sample_shape() == std::vector<std::size_t>{2});
  CHECK(tr.num_classes() == 3);
  // Every row is there once, with its features intact: f1 = -i identifies it.
  std::vector<int> seen(50, 0);
  for (Dataset* ds : {&tr, &te}) {
    std::vector<std::uint64_t> idx(ds->size());
    std::iota(idx.begin(), idx.end(), std::uint64_t{0});
    std::vector<float> x(ds->size() * 2);
    std::vector<std::int32_t> y(ds->size());
    ds->read(idx, x.data(), y.data());
    for (std::size_t k = 0; k < ds->size(); ++k) {
      const int i = static_cast<int>(-x[2 * k + 1]);
      REQUIRE(i >= 0);
      REQUIRE(i < 50);
      CHECK(x[2 * k] == static_cast<float>(i * 0.5));
      CHECK(y[k] == i % 3);
      ++seen[static_cast<std::size_t>(i)];
    }
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int s) { return s == 1; }));

  {
    std::ofstream f(at("bad.csv"));
    f << "1,2.5,3\n0,oops,1\n";
  }
  o.train = at("bad.csv");
  o.force = true;                      // the output exists by now: these are about the inputs
  o.label_column = std::to_string(0);  // (a literal here trips a GCC 12 -Wrestrict false positive)
  CHECK_THROWS_WITH(convert_csv(o), Contains("bad.csv:2: column 2: 'oops' is not a number"));
  {
    std::ofstream f(at("ragged.csv"));
    f << "1,2.5,3\n0,1\n";
  }
  o.train = at("ragged.csv");
  CHECK_THROWS_WITH(convert_csv(o), Contains("ragged.csv:2: 2 columns, expected 3"));
}

TEST_CASE("synthetic: reproducible from the seed, learnable, any shape") {
  SyntheticOptions o;
  o.n = 600;
  o.test_n = 200;
  o.shape = {2, 4};
  o.classes = 5;
  o.seed = 11;
  o.output = at("syn-a.h5");
  make_synthetic(o);
  o.output = at("syn-b.h5");
  make_synthetic(o);
  o.seed = 12;
  o.output = at("syn-c.h5");
  make_synthetic(o);
  auto stored = [](const std::string& p) {
    Dataset ds = Dataset::open(p, "train");
    std::vector<float> x(ds.size() * ds.sample_elements());
    ds.read_stored(0, ds.size(), x.data());
    return std::make_pair(x, ds.labels());
  };
  CHECK(stored(at("syn-a.h5")) == stored(at("syn-b.h5")));
  CHECK(stored(at("syn-a.h5")) != stored(at("syn-c.h5")));

  // Learnable: nearest class mean (from train) classifies test well above chance.
  Dataset tr = Dataset::open(at("syn-a.h5"), "train"), te = Dataset::open(at("syn-a.h5"), "test");
  CHECK(te.size() == 200);
  CHECK(tr.sample_shape() == std::vector<std::size_t>{2, 4});
  const std::size_t d = 8;
  std::vector<double> mean(5 * d, 0.0);
  std::vector<int> count(5, 0);
  std::vector<float> x(tr.size() * d);
  tr.read_stored(0, tr.size(), x.data());
  for (std::size_t i = 0; i < tr.size(); ++i) {
    const auto c = static_cast<std::size_t>(tr.labels()[i]);
    ++count[c];
    for (std::size_t e = 0; e < d; ++e) mean[c * d + e] += x[i * d + e];
  }
  for (std::size_t c = 0; c < 5; ++c) {
    REQUIRE(count[c] > 0);
    for (std::size_t e = 0; e < d; ++e) mean[c * d + e] /= count[c];
  }
  std::vector<float> xt(te.size() * d);
  te.read_stored(0, te.size(), xt.data());
  int correct = 0;
  for (std::size_t i = 0; i < te.size(); ++i) {
    std::size_t best = 0;
    double best_d = 1e300;
    for (std::size_t c = 0; c < 5; ++c) {
      double dist = 0;
      for (std::size_t e = 0; e < d; ++e) dist += std::pow(xt[i * d + e] - mean[c * d + e], 2);
      if (dist < best_d) best_d = dist, best = c;
    }
    correct += static_cast<int>(best) == te.labels()[i];
  }
  CHECK(correct > 200 * 6 / 10);  // chance is 1 in 5

  o.dtype = "u8";
  o.shape = {1, 3, 3};
  o.output = at("syn-u8.h5");
  make_synthetic(o);
  Dataset u8 = Dataset::open(o.output, "train");
  CHECK(u8.stored_dtype() == SampleDType::u8);
  CHECK(u8.scale() == 1.0f / 255.0f);
}

TEST_CASE("an output that is an input is refused, even with force; an existing one without it") {
  const std::string csv = at("guard.csv");
  const std::string text = "0,1.5,2\n1,0.5,1\n0,1,1\n1,2,0.25\n0,3,1\n1,1,1\n";
  {
    std::ofstream f(csv);
    f << text;
  }
  const auto contents = [](const std::string& p) { return test::slurp(p); };
  CsvConvertOptions o;
  o.train = csv;
  o.test_fraction = 0.5;
  o.header = "no";
  o.output = csv;
  o.force = true;
  CHECK_THROWS_WITH(convert_csv(o),
                    Contains("--output " + csv + " is also the input --train " + csv));
  // The same file by another spelling.
  o.output = at(".") + "/./guard.csv";
  CHECK_THROWS_WITH(convert_csv(o), Contains("is also the input --train"));
  CHECK(contents(csv) == text);
  o.output = at("guard.h5");
  o.force = false;
  convert_csv(o);
  CHECK_THROWS_WITH(convert_csv(o), Contains("--output " + at("guard.h5") +
                                             " already exists: pass --force to replace it"));
  o.force = true;
  convert_csv(o);
  // No temporary is left beside the output.
  for (const auto& e : std::filesystem::directory_iterator(dir()))
    CHECK(e.path().filename().string().find(".tmp") == std::string::npos);
  CHECK_THROWS_WITH(guard_output(dir(), {}, true), Contains("is a directory"));
  CHECK_NOTHROW(guard_output(at("new.h5"), {{"--train", csv}, {"--test", ""}}, false));
}

TEST_CASE("CSV: labels that are names map to classes, sorted or in --class-names order") {
  {
    std::ofstream f(at("named-train.csv"));
    f << "dog,1,2\ncat,0.5,1\nbird,1,1\ncat,2,0.25\n";
  }
  {
    std::ofstream f(at("named-test.csv"));
    f << "bird,3,1\ndog,1,1\n";
  }
  CsvConvertOptions o;
  o.train = at("named-train.csv");
  o.test = at("named-test.csv");
  o.output = at("named-sorted.h5");
  convert_csv(o);
  Dataset sorted = Dataset::open(o.output, "train");
  CHECK(sorted.class_names() == std::vector<std::string>{"bird", "cat", "dog"});
  CHECK(sorted.labels() == std::vector<std::int32_t>{2, 1, 0, 1});
  CHECK(Dataset::open(o.output, "test").labels() == std::vector<std::int32_t>{0, 2});

  o.class_names = {"cat", "dog", "bird"};
  o.output = at("named-ordered.h5");
  convert_csv(o);
  Dataset ordered = Dataset::open(o.output, "train");
  CHECK(ordered.class_names() == o.class_names);
  CHECK(ordered.labels() == std::vector<std::int32_t>{1, 0, 2, 0});

  o.class_names = {"cat", "dog"};
  o.output = at("named-missing.h5");
  CHECK_THROWS_WITH(convert_csv(o), Contains("named-train.csv:3: label 'bird' is not one of "
                                             "--class-names cat,dog"));
}
