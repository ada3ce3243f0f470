// Checkpoints: round trip, keep-last-K, clear errors for damaged or foreign
// files, and crash safety (a writer killed mid-write leaves the previous
// checkpoint as the latest complete one).
#include <catch2/catch.hpp>

#include <hdf5.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <thread>

#include "ringtrain/core/error.h"
#include "ringtrain/train/checkpoint.h"
#include "tests/support/temp_dir.h"

using namespace ringtrain;
namespace fs = std::filesystem;
using ringtrain::test::TempDir;

namespace {

// A fresh directory per test case, removed afterwards.
// Data is a function of (tensor, index), never constant.
std::vector<float> pattern(std::size_t n, int tensor) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = static_cast<float>(tensor) * 1000.0f + static_cast<float>(i) * 0.25f - 7.0f;
  return v;
}

struct Model {
  std::vector<std::string> names;
  std::vector<std::vector<std::size_t>> shapes;
  std::vector<std::vector<float>> data;

  std::vector<TensorRecord> records() const {
    std::vector<TensorRecord> out;
    for (std::size_t i = 0; i < names.size(); ++i)
      out.push_back({names[i], shapes[i], data[i].data(), data[i].size()});
    return out;
  }
  std::vector<TensorSpec> specs() const {
    std::vector<TensorSpec> out;
    for (std::size_t i = 0; i < names.size(); ++i) out.push_back({names[i], shapes[i]});
    return out;
  }
};

std::size_t product(const std::vector<std::size_t>& s) {
  std::size_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// Names deliberately not in alphabetical order: the file must keep model order.
Model make_params() {
  Model m;
  m.names = {"conv1.weight", "conv1.bias", "fc.weight", "fc.bias",
             "empty",        "scalar",     "one",       "big_odd"};
  m.shapes = {{8, 1, 3, 3}, {8}, {10, 72}, {10}, {0}, {}, {1}, {3, 1001}};
  for (std::size_t i = 0; i < m.names.size(); ++i)
    m.data.push_back(pattern(product(m.shapes[i]), static_cast<int>(i) + 1));
  return m;
}

Model make_optimizer() {
  Model m;
  m.names = {"momentum", "step_count"};
  m.shapes = {{3 + 8 * 9 + 8 + 720 + 10 + 1 + 1 + 3003}, {1}};
  for (std::size_t i = 0; i < m.names.size(); ++i)
    m.data.push_back(pattern(product(m.shapes[i]), 50 + static_cast<int>(i)));
  return m;
}

CheckpointMeta make_meta(std::uint64_t step) {
  CheckpointMeta meta;
  meta.step = step;
  meta.epoch = 3;
  meta.epoch_step = 17;
  meta.global_batch = 256;
  meta.world_size = 4;
  meta.rng_state = {0x0123456789abcdefULL, 42, 0xffffffffffffffffULL, 7};
  meta.model_spec = "cnn:conv8-fc10";
  meta.model_hash = 0xfeedfacecafebeefULL;
  meta.config_json = R"({"lr":0.05,"batch":64,"note":"ünïcödé"})";
  meta.finished = false;
  return meta;
}

CheckpointExpectation expectation(const Model& params, const Model& opt) {
  CheckpointExpectation e;
  e.model_hash = 0xfeedfacecafebeefULL;
  e.model_spec = "cnn:conv8-fc10";
  e.params = params.specs();
  e.optimizer = opt.specs();
  return e;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

void copy_prefix(const std::string& from, const std::string& to, std::size_t bytes) {
  std::ifstream in(from, std::ios::binary);
  std::vector<char> buf(bytes);
  in.read(buf.data(), static_cast<std::streamsize>(bytes));
  std::ofstream out(to, std::ios::binary | std::ios::trunc);
  out.write(buf.data(), static_cast<std::streamsize>(bytes));
}

std::vector<std::string> dir_names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("checkpoint round trip keeps every tensor, shape, order and attribute bit for bit") {
  TempDir dir("ckpt-roundtrip");
  const Model params = make_params();
  const Model opt = make_optimizer();
  CheckpointMeta meta = make_meta(120);
  const std::string path =
      write_checkpoint_atomic(dir.str(), meta, params.records(), opt.records(), 3);
  CHECK(path == (dir.path / "ckpt-120.h5").string());
  CHECK(dir_names(dir.str()) == std::vector<std::string>{"ckpt-120.h5"});

  const LoadedCheckpoint ck = read_checkpoint(path, expectation(params, opt));
  CHECK(ck.path == path);
  CHECK(ck.meta.step == 120);
  CHECK(ck.meta.epoch == 3);
  CHECK(ck.meta.epoch_step == 17);
  CHECK(ck.meta.global_batch == 256);
  CHECK(ck.meta.world_size == 4);
  CHECK(ck.meta.rng_state == meta.rng_state);
  CHECK(ck.meta.model_spec == meta.model_spec);
  CHECK(ck.meta.model_hash == meta.model_hash);
  CHECK(ck.meta.config_json == meta.config_json);
  CHECK_FALSE(ck.meta.finished);

  REQUIRE(ck.params.size() == params.names.size());
  REQUIRE(ck.param_shapes.size() == params.names.size());
  for (std::size_t i = 0; i < params.names.size(); ++i) {
    INFO("param " << params.names[i]);
    CHECK(ck.params[i].first == params.names[i]);
    CHECK(ck.param_shapes[i] == params.shapes[i]);
    REQUIRE(ck.params[i].second.size() == params.data[i].size());
    CHECK(std::memcmp(ck.params[i].second.data(), params.data[i].data(),
                      params.data[i].size() * sizeof(float)) == 0);
  }
  REQUIRE(ck.optimizer.size() == opt.names.size());
  for (std::size_t i = 0; i < opt.names.size(); ++i) {
    CHECK(ck.optimizer[i].first == opt.names[i]);
    CHECK(ck.optimizer_shapes[i] == opt.shapes[i]);
    CHECK(ck.optimizer[i].second == opt.data[i]);
  }

  // An empty RNG state, an empty optimizer, empty strings and finished=true.
  meta = make_meta(121);
  meta.rng_state.clear();
  meta.model_spec.clear();
  meta.config_json.clear();
  meta.finished = true;
  write_checkpoint_atomic(dir.str(), meta, params.records(), {}, 3);
  const LoadedCheckpoint ck2 = read_checkpoint(*latest_checkpoint(dir.str()));
  CHECK(ck2.meta.step == 121);
  CHECK(ck2.meta.rng_state.empty());
  CHECK(ck2.meta.model_spec.empty());
  CHECK(ck2.meta.config_json.empty());
  CHECK(ck2.meta.finished);
  CHECK(ck2.optimizer.empty());
  CHECK(ck2.params.size() == params.names.size());
}

TEST_CASE("checkpoints keep the last K, sorted by step numerically") {
  TempDir dir("ckpt-keep");
  const Model params = make_params();
  for (std::uint64_t step : {1, 2, 3, 9, 10, 11})
    write_checkpoint_atomic(dir.str(), make_meta(step), params.records(), {}, 3);
  CHECK(dir_names(dir.str()) == std::vector<std::string>{"ckpt-10.h5", "ckpt-11.h5", "ckpt-9.h5"});
  const auto list = list_checkpoints(dir.str());
  REQUIRE(list.size() == 3);
  CHECK(list[0].first == 9);
  CHECK(list[1].first == 10);
  CHECK(list[2].first == 11);
  CHECK(*latest_checkpoint(dir.str()) == (dir.path / "ckpt-11.h5").string());

  // keep = 1 leaves only the newest; keep = 0 keeps everything.
  write_checkpoint_atomic(dir.str(), make_meta(100), params.records(), {}, 1);
  CHECK(dir_names(dir.str()) == std::vector<std::string>{"ckpt-100.h5"});
  for (std::uint64_t step : {101, 102, 103})
    write_checkpoint_atomic(dir.str(), make_meta(step), params.records(), {}, 0);
  CHECK(list_checkpoints(dir.str()).size() == 4);

  // Rewriting the same step replaces it.
  CheckpointMeta again = make_meta(103);
  again.finished = true;
  write_checkpoint_atomic(dir.str(), again, params.records(), {}, 0);
  CHECK(list_checkpoints(dir.str()).size() == 4);
  CHECK(read_checkpoint(*latest_checkpoint(dir.str())).meta.finished);
}

TEST_CASE("pruning never touches the new checkpoint nor checkpoints of later steps") {
  // A fresh run, or one resumed from an older checkpoint, in a directory that
  // already holds later steps: keep-last-K applies to this run's steps only.
  TempDir dir("ckpt-later");
  const Model params = make_params();
  write_checkpoint_atomic(dir.str(), make_meta(500), params.records(), {}, 2);
  for (std::uint64_t step : {10, 20, 30}) {
    const std::string path =
        write_checkpoint_atomic(dir.str(), make_meta(step), params.records(), {}, 2);
    CHECK(fs::exists(path));
  }
  CHECK(dir_names(dir.str()) ==
        std::vector<std::string>{"ckpt-20.h5", "ckpt-30.h5", "ckpt-500.h5"});
  write_checkpoint_atomic(dir.str(), make_meta(600), params.records(), {}, 2);
  CHECK(dir_names(dir.str()) == std::vector<std::string>{"ckpt-500.h5", "ckpt-600.h5"});
}

TEST_CASE("list and latest ignore temporaries and unrelated files") {
  TempDir dir("ckpt-ignore");
  CHECK(list_checkpoints(dir.str()).empty());
  CHECK_FALSE(latest_checkpoint(dir.str()).has_value());
  CHECK_FALSE(latest_checkpoint((dir.path / "does-not-exist").string()).has_value());

  const Model params = make_params();
  write_checkpoint_atomic(dir.str(), make_meta(5), params.records(), {}, 0);
  for (const char* junk : {"ckpt-900.h5.tmp-1234", "ckpt-.h5", "ckpt-12a.h5", "ckpt-13.h5.bak",
                           "notes.txt", "ckpt-99999999999999999999999.h5"})
    std::ofstream(dir.path / junk) << "junk";
  fs::create_directories(dir.path / "ckpt-700.h5");  // a directory, not a file
  const auto list = list_checkpoints(dir.str());
  REQUIRE(list.size() == 1);
  CHECK(list[0].first == 5);
  CHECK(*latest_checkpoint(dir.str()) == (dir.path / "ckpt-5.h5").string());

  // The next successful write removes the stale temporary, and nothing else.
  write_checkpoint_atomic(dir.str(), make_meta(6), params.records(), {}, 0);
  CHECK_FALSE(fs::exists(dir.path / "ckpt-900.h5.tmp-1234"));
  CHECK(fs::exists(dir.path / "notes.txt"));
  CHECK(fs::exists(dir.path / "ckpt-5.h5"));
}

TEST_CASE("invalid records are rejected before anything is written") {
  TempDir dir("ckpt-badrecords");
  std::vector<float> data = pattern(12, 1);
  auto err = error_of([&] {
    write_checkpoint_atomic(dir.str(), make_meta(1), {{"w", {3, 5}, data.data(), 12}}, {}, 0);
  });
  CHECK_THAT(err, Catch::Contains("ckpt-1.h5") &&
                      Catch::Contains("'params/w' has shape [3, 5] (15 elements) but count 12"));
  err = error_of([&] {
    write_checkpoint_atomic(dir.str(), make_meta(1),
                            {{"w", {12}, data.data(), 12}, {"w", {12}, data.data(), 12}}, {}, 0);
  });
  CHECK_THAT(err, Catch::Contains("'w' appears twice"));
  err = error_of([&] {
    write_checkpoint_atomic(dir.str(), make_meta(1), {{"a/b", {12}, data.data(), 12}}, {}, 0);
  });
  CHECK_THAT(err, Catch::Contains("'a/b'"));
  err = error_of([&] {
    write_checkpoint_atomic(dir.str(), make_meta(1), {}, {{"m", {2}, nullptr, 2}}, 0);
  });
  CHECK_THAT(err, Catch::Contains("'optimizer/m' has no data"));
  CHECK(dir_names(dir.str()).empty());

  // A directory that cannot be created is named in the error.
  std::ofstream(dir.path / "plainfile") << "x";
  err = error_of([&] {
    write_checkpoint_atomic((dir.path / "plainfile" / "sub").string(), make_meta(1), {}, {}, 0);
  });
  CHECK_THAT(err, Catch::Contains("plainfile/sub"));
}

TEST_CASE("damaged and foreign files give clear errors naming the file") {
  TempDir dir("ckpt-damaged");
  const Model params = make_params();
  const Model opt = make_optimizer();
  const std::string good =
      write_checkpoint_atomic(dir.str(), make_meta(7), params.records(), opt.records(), 0);
  const std::size_t size = fs::file_size(good);

  SECTION("missing file") {
    const std::string p = (dir.path / "ckpt-8.h5").string();
    CHECK_THAT(error_of([&] { read_checkpoint(p); }),
               Catch::Contains(p) && Catch::Contains("no such file"));
  }
  SECTION("garbage bytes") {
    const std::string p = (dir.path / "garbage.h5").string();
    std::ofstream out(p, std::ios::binary);
    for (int i = 0; i < 5000; ++i) out.put(static_cast<char>((i * 7919 + 13) & 0xff));
    out.close();
    CHECK_THAT(error_of([&] { read_checkpoint(p); }),
               Catch::Contains(p) && Catch::Contains("not an HDF5 file"));
  }
  SECTION("empty file") {
    const std::string p = (dir.path / "empty.h5").string();
    std::ofstream(p).close();
    CHECK_THAT(error_of([&] { read_checkpoint(p); }),
               Catch::Contains(p) && Catch::Contains("not an HDF5 file"));
  }
  SECTION("truncated at several points") {
    for (std::size_t keep : {std::size_t{4096}, size / 2, size - 1}) {
      INFO("truncated to " << keep << " of " << size << " bytes");
      const std::string p = (dir.path / "truncated.h5").string();
      copy_prefix(good, p, keep);
      CHECK_THAT(error_of([&] { read_checkpoint(p); }),
                 Catch::Contains(p) && Catch::Contains("corrupt or truncated"));
    }
  }
  SECTION("a flipped byte inside a tensor fails its checksum") {
    // Find fc.weight's bytes in the file (it is stored little-endian, as in memory).
    std::ifstream in(good, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto& w = params.data[2];
    auto it = std::search(bytes.begin(), bytes.end(), reinterpret_cast<const char*>(w.data()),
                          reinterpret_cast<const char*>(w.data() + 16));
    REQUIRE(it != bytes.end());
    it[5] ^= 0x10;
    const std::string p = (dir.path / "flipped.h5").string();
    std::ofstream(p, std::ios::binary)
        .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    CHECK_THAT(error_of([&] { read_checkpoint(p); }), Catch::Contains(p) &&
                                                          Catch::Contains("/params/fc.weight") &&
                                                          Catch::Contains("corrupt"));
  }
}

namespace {
// Edits a copy of a good checkpoint with the HDF5 API, to make structurally
// wrong files.
std::string edited_copy(const std::string& good, const std::string& to,
                        const std::function<void(hid_t)>& edit) {
  fs::copy_file(good, to, fs::copy_options::overwrite_existing);
  hid_t f = H5Fopen(to.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  REQUIRE(f >= 0);
  edit(f);
  REQUIRE(H5Fclose(f) >= 0);
  return to;
}
}  // namespace

TEST_CASE("structural problems are named: group, attribute, version") {
  TempDir dir("ckpt-structure");
  const Model params = make_params();
  const Model opt = make_optimizer();
  const std::string good =
      write_checkpoint_atomic(dir.str(), make_meta(7), params.records(), opt.records(), 0);

  const std::string no_opt = edited_copy(good, (dir.path / "noopt.h5").string(), [](hid_t f) {
    REQUIRE(H5Ldelete(f, "optimizer", H5P_DEFAULT) >= 0);
  });
  CHECK_THAT(error_of([&] { read_checkpoint(no_opt); }),
             Catch::Contains(no_opt) && Catch::Contains("missing group 'optimizer'"));

  const std::string no_step = edited_copy(good, (dir.path / "nostep.h5").string(),
                                          [](hid_t f) { REQUIRE(H5Adelete(f, "step") >= 0); });
  CHECK_THAT(error_of([&] { read_checkpoint(no_step); }),
             Catch::Contains(no_step) && Catch::Contains("missing attribute 'step'"));

  const std::string v2 = edited_copy(good, (dir.path / "v2.h5").string(), [](hid_t f) {
    hid_t a = H5Aopen(f, "format_version", H5P_DEFAULT);
    const std::uint32_t two = 2;
    REQUIRE(H5Awrite(a, H5T_NATIVE_UINT32, &two) >= 0);
    H5Aclose(a);
  });
  CHECK_THAT(error_of([&] { read_checkpoint(v2); }), Catch::Contains(v2) &&
                                                         Catch::Contains("format version 2") &&
                                                         Catch::Contains("reads version 1"));

  const std::string subgroup = edited_copy(good, (dir.path / "subgroup.h5").string(), [](hid_t f) {
    hid_t g = H5Gcreate2(f, "params/nested", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(g >= 0);
    H5Gclose(g);
  });
  CHECK_THAT(error_of([&] { read_checkpoint(subgroup); }),
             Catch::Contains("/params/nested: not a dataset"));

  // A plain HDF5 file that is not a checkpoint at all.
  const std::string other = (dir.path / "other.h5").string();
  hid_t f = H5Fcreate(other.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  H5Fclose(f);
  CHECK_THAT(error_of([&] { read_checkpoint(other); }),
             Catch::Contains(other) && Catch::Contains("not a ringtrain checkpoint"));
}

TEST_CASE("validation against the running model names what differs") {
  TempDir dir("ckpt-validate");
  const Model params = make_params();
  const Model opt = make_optimizer();
  const std::string path =
      write_checkpoint_atomic(dir.str(), make_meta(7), params.records(), opt.records(), 0);
  const LoadedCheckpoint ck = read_checkpoint(path);
  CHECK_NOTHROW(validate_checkpoint(ck, expectation(params, opt)));

  CheckpointExpectation e = expectation(params, opt);
  e.model_hash = 0x1234;
  e.model_spec = "mlp:784-10";
  CHECK_THAT(error_of([&] { validate_checkpoint(ck, e); }),
             Catch::Contains(path) && Catch::Contains("'cnn:conv8-fc10'") &&
                 Catch::Contains("'mlp:784-10'"));

  e = expectation(params, opt);
  e.params[2].shape = {10, 71};
  CHECK_THAT(error_of([&] { validate_checkpoint(ck, e); }),
             Catch::Contains("'params/fc.weight' has shape [10, 72] (720 elements), the model "
                             "expects [10, 71] (710 elements)"));

  e = expectation(params, opt);
  e.params.pop_back();
  e.params.push_back({"fc2.weight", {4}});
  e.params.push_back({"fc2.bias", {4}});
  CHECK_THAT(error_of([&] { validate_checkpoint(ck, e); }),
             Catch::Contains("holds 8 tensors, the model expects 9") &&
                 Catch::Contains("missing: fc2.weight, fc2.bias") &&
                 Catch::Contains("unexpected: big_odd"));

  e = expectation(params, opt);
  std::swap(e.params[0], e.params[1]);
  CHECK_THAT(error_of([&] { validate_checkpoint(ck, e); }),
             Catch::Contains(
                 "tensor 0 of group 'params' is 'conv1.weight', the model expects 'conv1.bias'"));

  e = expectation(params, opt);
  e.optimizer = std::vector<TensorSpec>{};
  CHECK_THAT(error_of([&] { validate_checkpoint(ck, e); }),
             Catch::Contains("group 'optimizer' holds 2 tensors, the model expects 0"));
  e.optimizer.reset();  // not checked
  CHECK_NOTHROW(validate_checkpoint(ck, e));

  CHECK_THAT(error_of([&] { read_checkpoint(path, CheckpointExpectation{}); }),
             Catch::Contains("hash"));
}

TEST_CASE("a writer killed mid-write leaves the previous checkpoint as the latest") {
  TempDir dir("ckpt-crash");
  const Model params = make_params();
  write_checkpoint_atomic(dir.str(), make_meta(10), params.records(), {}, 0);

  // The child writes big checkpoints (steps 11, 12, ...) in a loop; the parent
  // kills it with SIGKILL as soon as a temporary is being filled. If the kill
  // happens to land between two writes, the experiment is repeated.
  bool killed_mid_write = false;
  for (int attempt = 0; attempt < 20 && !killed_mid_write; ++attempt) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      std::vector<float> big = pattern(std::size_t{16} << 20, 9);  // 64 MiB
      const std::vector<TensorRecord> recs{{"huge", {big.size()}, big.data(), big.size()}};
      for (std::uint64_t step = 11;; ++step) {
        try {
          write_checkpoint_atomic(dir.str(), make_meta(step), recs, {}, 0);
        } catch (...) {
          ::_exit(3);
        }
      }
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    std::string temp;
    while (temp.empty() && std::chrono::steady_clock::now() < deadline) {
      for (const auto& e : fs::directory_iterator(dir.path)) {
        const std::string n = e.path().filename().string();
        std::error_code ec;
        if (n.find(".tmp-") != std::string::npos && fs::file_size(e.path(), ec) > (1u << 20) && !ec)
          temp = n;
      }
      if (temp.empty()) std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFSIGNALED(status));
    REQUIRE(!temp.empty());
    killed_mid_write = fs::exists(dir.path / temp);
  }
  REQUIRE(killed_mid_write);

  // The temporary is still there, and it is never taken for a checkpoint.
  const auto list = list_checkpoints(dir.str());
  REQUIRE(!list.empty());
  const std::string latest = *latest_checkpoint(dir.str());
  CHECK(latest == list.back().second);
  for (const auto& [step, path] : list) {
    INFO(path);
    CHECK(path.find(".tmp-") == std::string::npos);
    const LoadedCheckpoint ck = read_checkpoint(path);  // every listed one is complete
    CHECK(ck.meta.step == step);
  }
  // The step-10 checkpoint written before the child started is intact.
  const LoadedCheckpoint first = read_checkpoint((dir.path / "ckpt-10.h5").string());
  CHECK(first.params.size() == params.names.size());
  CHECK(first.params[7].second == params.data[7]);
}

TEST_CASE(
    "a checkpoint of non-finite parameters or optimizer state is refused, naming the tensor") {
  TempDir dir("nonfinite");
  Model params = make_params();
  write_checkpoint_atomic(dir.str(), make_meta(1), params.records(), {}, 3);
  params.data[2][5] = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH(write_checkpoint_atomic(dir.str(), make_meta(2), params.records(), {}, 3),
                    Catch::Contains("tensor 'params/fc.weight' holds non-finite values") &&
                        Catch::Contains("ckpt-2.h5"));
  Model state = make_params();
  params.data[2][5] = 1.0f;
  state.data[1][0] = std::numeric_limits<float>::infinity();
  CHECK_THROWS_WITH(
      write_checkpoint_atomic(dir.str(), make_meta(3), params.records(), state.records(), 3),
      Catch::Contains("conv1.bias' holds non-finite values"));
  // Nothing of the refused steps is on disk; the good checkpoint is kept.
  CHECK(dir_names(dir.str()) == std::vector<std::string>{"ckpt-1.h5"});
}
