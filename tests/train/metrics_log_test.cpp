// metrics.jsonl: one parseable object per line, flushed per line, resume keeps
// the history up to the checkpoint step.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "ringtrain/core/error.h"
#include "ringtrain/train/metrics_log.h"
#include "tests/support/read_file.h"
#include "tests/support/temp_dir.h"

using namespace ringtrain;
namespace fs = std::filesystem;
using nlohmann::json;
using ringtrain::test::slurp;
using ringtrain::test::TempDir;

namespace {

std::vector<json> read_lines(const fs::path& p) {
  std::vector<json> out;
  std::ifstream in(p);
  std::string line;
  while (std::getline(in, line)) out.push_back(json::parse(line));
  return out;
}

json step_record(std::uint64_t step) {
  return {{"kind", "train"},
          {"step", step},
          {"loss", 2.5 / static_cast<double>(step + 1)},
          {"lr", 0.1}};
}

}  // namespace

TEST_CASE("metrics log writes one flushed JSON object per line") {
  TempDir dir("metrics-basic", /*create=*/false);
  const fs::path file = dir.path / "sub" / "metrics.jsonl";  // the directory is created
  MetricsLog log(file.string(), std::nullopt);
  CHECK(log.path() == file.string());
  log.write(step_record(1));
  // Flushed: visible to another reader before the log is closed.
  CHECK(read_lines(file).size() == 1);
  log.write(
      {{"kind", "eval"}, {"step", 1}, {"accuracy", 0.875}, {"loss", NAN}, {"tag", "caf\xc3\xa9"}});
  log.write({{"kind", "note"}, {"text", "bad utf-8 \xff here"}});
  const auto lines = read_lines(file);
  REQUIRE(lines.size() == 3);
  CHECK(lines[0]["step"] == 1);
  CHECK(lines[0]["loss"].get<double>() == Approx(1.25));
  CHECK(lines[1]["accuracy"].get<double>() == 0.875);
  CHECK(lines[1]["loss"].is_null());  // NaN has no JSON form
  CHECK(lines[1]["tag"] == "caf\xc3\xa9");
  CHECK(lines[2]["text"].get<std::string>().find("here") != std::string::npos);

  CHECK_THROWS_AS(log.write(json::array({1, 2})), Error);
  CHECK_THROWS_AS(log.write(json(3)), Error);
}

TEST_CASE("a new run starts the file afresh") {
  TempDir dir("metrics-fresh", /*create=*/false);
  const fs::path file = dir.path / "metrics.jsonl";
  {
    MetricsLog log(file.string(), std::nullopt);
    for (std::uint64_t s = 1; s <= 5; ++s) log.write(step_record(s));
  }
  {
    MetricsLog log(file.string(), std::nullopt);
    log.write(step_record(1));
  }
  CHECK(read_lines(file).size() == 1);
}

TEST_CASE(
    "a resumed run keeps records through the checkpoint step and drops later and partial ones") {
  TempDir dir("metrics-resume", /*create=*/false);
  const fs::path file = dir.path / "metrics.jsonl";
  {
    MetricsLog log(file.string(), std::nullopt);
    log.write({{"kind", "start"}, {"world", 2}});  // no step: always kept
    for (std::uint64_t s = 1; s <= 10; ++s) {
      log.write(step_record(s));
      if (s % 4 == 0)
        log.write(
            {{"kind", "eval"}, {"step", s}, {"accuracy", 0.5 + 0.01 * static_cast<double>(s)}});
    }
  }
  // The previous run was killed mid-line.
  { std::ofstream(file, std::ios::app) << R"({"kind":"train","step":11,"lo)"; }

  {
    MetricsLog log(file.string(), std::uint64_t{5});
    for (std::uint64_t s = 6; s <= 7; ++s) log.write(step_record(s));
  }
  const auto lines = read_lines(file);  // every line parses
  std::vector<std::uint64_t> steps;
  for (const auto& l : lines)
    if (l.contains("step")) steps.push_back(l["step"].get<std::uint64_t>());
  CHECK(lines.front()["kind"] == "start");
  CHECK(steps == std::vector<std::uint64_t>{1, 2, 3, 4, 4, 5, 6, 7});
  CHECK(slurp(file).back() == '\n');

  // Resuming into a directory with no log yet just creates it.
  const fs::path other = dir.path / "new" / "metrics.jsonl";
  MetricsLog fresh(other.string(), std::uint64_t{100});
  fresh.write(step_record(101));
  CHECK(read_lines(other).size() == 1);
}

TEST_CASE("lines from several threads never interleave") {
  TempDir dir("metrics-threads", /*create=*/false);
  const fs::path file = dir.path / "metrics.jsonl";
  MetricsLog log(file.string(), std::nullopt);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&log, t] {
      for (int i = 0; i < 250; ++i)
        log.write({{"thread", t},
                   {"i", i},
                   {"payload", std::string(static_cast<std::size_t>(i % 97), 'x')}});
    });
  for (auto& th : threads) th.join();
  const auto lines = read_lines(file);
  CHECK(lines.size() == 1000);
}

TEST_CASE("metrics_record_step reads only non-negative integer steps") {
  CHECK(metrics_record_step({{"step", 7}}) == std::optional<std::uint64_t>(7));
  CHECK_FALSE(metrics_record_step({{"step", -1}}));
  CHECK_FALSE(metrics_record_step({{"step", 1.5}}));
  CHECK_FALSE(metrics_record_step({{"step", "3"}}));
  CHECK_FALSE(metrics_record_step({{"loss", 3}}));
  CHECK_FALSE(metrics_record_step(json::array()));
}

TEST_CASE("an unwritable path is a clear error") {
  TempDir dir("metrics-unwritable", /*create=*/false);
  fs::create_directories(dir.path);
  std::ofstream(dir.path / "file") << "x";
  try {
    MetricsLog log((dir.path / "file" / "metrics.jsonl").string(), std::nullopt);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("file"));
  }
}
