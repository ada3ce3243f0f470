// The record of convolution engines chosen by time (ops/conv_engine_record.h):
// a choice survives into the next process through its file, the last line
// of a key wins, damaged lines and an unfinished last line are skipped, an
// unwritable file costs the cross-run memory only, processes deciding one key
// at once take the first one's engine; and the choice by time keeps the
// least workspace, then the earliest candidate, within the tie.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "ops/conv_engine_record.h"
#include "tests/support/temp_dir.h"

using namespace ringtrain;
using detail::EngineChoiceRecord;

namespace {
std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

TEST_CASE("a remembered engine is found by the next process's record", "[conv_engine_record]") {
  test::TempDir dir("engine-record");
  const std::string file = (dir.path / "sub" / "conv-engines.tsv").string();  // made on write
  {
    EngineChoiceRecord first(file);
    CHECK_FALSE(first.find("H200|cuDNN 91900|wgrad bf16 n256").has_value());
    first.remember("H200|cuDNN 91900|wgrad bf16 n256", "eng12_k2=3 dW bf16 KRSC");
    first.remember("H200|cuDNN 91900|fprop bf16 n256", "eng62_k2=4");
    // The same engine again is not appended again; another supersedes it.
    first.remember("H200|cuDNN 91900|fprop bf16 n256", "eng62_k2=4");
    first.remember("H200|cuDNN 91900|wgrad bf16 n256", "eng70 dW f32 KCRS");
    CHECK(first.find("H200|cuDNN 91900|wgrad bf16 n256") == "eng70 dW f32 KCRS");
  }
  CHECK(read_all(file) ==
        "H200|cuDNN 91900|wgrad bf16 n256\teng12_k2=3 dW bf16 KRSC\n"
        "H200|cuDNN 91900|fprop bf16 n256\teng62_k2=4\n"
        "H200|cuDNN 91900|wgrad bf16 n256\teng70 dW f32 KCRS\n");
  EngineChoiceRecord next(file);
  CHECK(next.find("H200|cuDNN 91900|wgrad bf16 n256") == "eng70 dW f32 KCRS");
  CHECK(next.find("H200|cuDNN 91900|fprop bf16 n256") == "eng62_k2=4");
  CHECK_FALSE(next.find("H100|cuDNN 91900|fprop bf16 n256").has_value());
}

TEST_CASE("the last line of a key wins; damaged and unfinished lines are skipped",
          "[conv_engine_record]") {
  test::TempDir dir("engine-record-damaged");
  const std::string file = (dir.path / "conv-engines.tsv").string();
  {
    std::ofstream out(file);
    // Two ranks that timed at once appended different engines: every reader
    // takes the last.
    out << "k1\teng1\n"
        << "k1\teng2\n"
        << "no tab here\n"
        << "\tno key\n"
        << "no engine\t\n"
        << "two\ttabs\there\n"
        << "\n"
        << "k2\teng3\n"
        << "k3\tunfinis";  // a write that did not finish
  }
  EngineChoiceRecord record(file);
  CHECK(record.find("k1") == "eng2");
  CHECK(record.find("k2") == "eng3");
  CHECK_FALSE(record.find("k3").has_value());
  CHECK_FALSE(record.find("no tab here").has_value());
  CHECK_FALSE(record.find("two").has_value());
  // A choice appended after the unfinished line starts a line of its own.
  record.remember("k4", "eng4");
  CHECK(record.find("k4") == "eng4");
  EngineChoiceRecord again(file);
  CHECK(again.find("k4") == "eng4");
  CHECK(again.find("k1") == "eng2");
  CHECK_FALSE(again.find("k3").has_value());
}

TEST_CASE("a record that cannot be written keeps choices for the process", "[conv_engine_record]") {
  test::TempDir dir("engine-record-denied");
  const std::string file = (dir.path / "conv-engines.tsv").string();
  if (::geteuid() == 0) {
    // root writes anyway: a directory in place of the file fails for root too.
    std::filesystem::create_directories(file);
  } else {
    ::chmod(dir.str().c_str(), 0500);
  }
  EngineChoiceRecord record(file);
  record.remember("k", "eng");  // warns once, does not throw
  record.remember("k2", "eng2");
  CHECK(record.find("k") == "eng");
  CHECK(record.find("k2") == "eng2");
  ::chmod(dir.str().c_str(), 0700);
  EngineChoiceRecord in_memory("");
  in_memory.remember("k", "eng");
  CHECK(in_memory.find("k") == "eng");
  CHECK(in_memory.path().empty());
}

TEST_CASE("the record's file follows RINGTRAIN_CONV_CACHE, XDG_CACHE_HOME, HOME",
          "[conv_engine_record]") {
  using detail::conv_engine_record_path;
  CHECK(conv_engine_record_path("/scratch/engines.tsv", "/x", "/h") == "/scratch/engines.tsv");
  CHECK(conv_engine_record_path("off", "/x", "/h").empty());
  CHECK(conv_engine_record_path("", "/x", "/h").empty());
  CHECK(conv_engine_record_path(nullptr, "/x", "/h") == "/x/ringtrain/conv-engines.tsv");
  CHECK(conv_engine_record_path(nullptr, "", "/h") == "/h/.cache/ringtrain/conv-engines.tsv");
  CHECK(conv_engine_record_path(nullptr, nullptr, nullptr).empty());
}

TEST_CASE("the choice by time: within the tie, the least workspace, then the earliest",
          "[conv_engine_record]") {
  using detail::choose_by_time;
  const auto choose = [](std::vector<float> ms, std::vector<std::size_t> ws = {}) {
    if (ws.empty()) ws.assign(ms.size(), 0);
    return choose_by_time(ms, ws, 0.10f);
  };
  // Round 7's case: the heuristics' first at 30 times the forward's time.
  CHECK(choose({4.0f, 0.14f, 0.13f}) == 1u);  // 0.14 is within 10% of 0.13
  CHECK(choose({4.0f, 0.15f, 0.13f}) == 2u);
  CHECK(choose({1.0f, 0.95f}) == 0u);        // the earlier one within the tie
  CHECK(choose({-1.0f, 2.0f, 1.0f}) == 2u);  // the first did not run
  // A hungrier engine a few percent faster does not win; a much faster one does.
  CHECK(choose({1.0f, 0.95f}, {1 << 20, 1 << 30}) == 0u);
  CHECK(choose({1.0f, 0.95f}, {1 << 30, 1 << 20}) == 1u);
  CHECK(choose({1.0f, 0.5f}, {0, 1 << 30}) == 1u);
  CHECK_FALSE(choose({-1.0f, -1.0f}).has_value());
  CHECK_FALSE(choose({}).has_value());
}

TEST_CASE("untimed, the first candidate neither wrong nor failed that is sure to run",
          "[conv_engine_record]") {
  using detail::first_usable_untimed;
  const std::vector<std::string> none;
  const auto any = [](std::size_t) { return true; };
  CHECK(first_usable_untimed(3, none, none, any) == 0u);
  CHECK(first_usable_untimed(3, none, none, {}) == 0u);  // no rule: any
  CHECK_FALSE(first_usable_untimed(0, none, none, any).has_value());
  // The first gave a wrong result, the second threw: the third.
  CHECK(first_usable_untimed(3, std::vector<std::string>{"entry 3 off", "", ""},
                             std::vector<std::string>{"", "no algorithm", ""}, any) == 2u);
  // A GEMM not sure to have an algorithm is skipped, and with nothing left
  // none is taken (the widened path runs the shape).
  const auto only_first_unsure = [](std::size_t i) { return i != 0; };
  CHECK(first_usable_untimed(2, none, none, only_first_unsure) == 1u);
  CHECK_FALSE(first_usable_untimed(1, none, none, only_first_unsure).has_value());
  CHECK_FALSE(first_usable_untimed(2, std::vector<std::string>{"", "x"}, none, only_first_unsure)
                  .has_value());
  // Spans shorter than the candidates (no timing ran): nothing against them.
  CHECK(first_usable_untimed(2, std::vector<std::string>{"wrong"}, none, any) == 1u);
}

TEST_CASE("a decision is handed the remembered engine and remembers a new one",
          "[conv_engine_record]") {
  test::TempDir dir("engine-record-decide");
  const std::string file = (dir.path / "conv-engines.tsv").string();
  EngineChoiceRecord first(file);
  std::optional<std::string> seen = "not called";
  CHECK(first.decide("k", [&](const std::optional<std::string>& kept) {
    seen = kept;
    return std::string("engA");
  }) == "engA");
  CHECK_FALSE(seen.has_value());
  // Untimed: nothing to remember.
  CHECK(first.decide("u", [](const std::optional<std::string>&) { return std::string(); }).empty());
  CHECK_FALSE(first.find("u").has_value());
  // The next process is handed engA, and taking it appends nothing.
  EngineChoiceRecord next(file);
  CHECK(next.decide("k", [&](const std::optional<std::string>& kept) {
    seen = kept;
    return kept.value_or("other");
  }) == "engA");
  CHECK(seen == "engA");
  CHECK(read_all(file) == "k\tengA\n");
  // A remembered engine no longer offered: the new choice supersedes it.
  CHECK(next.decide("k", [](const std::optional<std::string>&) { return std::string("engB"); }) ==
        "engB");
  CHECK(EngineChoiceRecord(file).find("k") == "engB");
}

TEST_CASE("processes that decide one key at once take the first one's engine",
          "[conv_engine_record]") {
  // Two ranks of a node reach the same shape on a first run: the second waits
  // for the first's lock, reads its line and is handed its engine.
  test::TempDir dir("engine-record-race");
  const std::string file = (dir.path / "conv-engines.tsv").string();
  int to_parent[2], holding[2];
  REQUIRE(::pipe(to_parent) == 0);
  REQUIRE(::pipe(holding) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // The child never returns into the test runner: whatever happens, it exits.
    try {
      ::close(holding[0]);
      ::close(to_parent[0]);
      EngineChoiceRecord record(file);
      const std::string got = record.decide("shape", [&](const std::optional<std::string>& kept) {
        if (kept) return *kept;
        (void)!::write(holding[1], "h", 1);  // the lock is held: the parent may start
        ::usleep(300000);                    // timing, while the other process waits
        return std::string("child-engine");
      });
      (void)!::write(to_parent[1], got.data(), got.size());
      ::_exit(0);
    } catch (...) {
      ::_exit(1);
    }
  }
  // The parent's copies of the write ends closed: a child that dies early
  // ends the reads below with end-of-file instead of a hang.
  ::close(holding[1]);
  ::close(to_parent[1]);
  struct Reap {
    pid_t pid;
    ~Reap() {
      int status = 0;
      ::waitpid(pid, &status, 0);
    }
  } reap{child};
  char held = 0;
  REQUIRE(::read(holding[0], &held, 1) == 1);  // the child holds the lock now
  EngineChoiceRecord record(file);
  const std::string got = record.decide("shape", [](const std::optional<std::string>& kept) {
    return kept ? *kept : std::string("parent-engine");
  });
  ::close(holding[0]);
  char buf[64] = {};
  const ssize_t n = ::read(to_parent[0], buf, sizeof buf - 1);
  ::close(to_parent[0]);
  REQUIRE(n > 0);
  CHECK(std::string(buf, static_cast<std::size_t>(n)) == "child-engine");
  CHECK(got == "child-engine");
  CHECK(read_all(file) == "shape\tchild-engine\n");
}
