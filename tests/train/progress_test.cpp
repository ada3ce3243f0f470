// The progress line as a pure function, the ETA estimate, the choice between
// redraw and plain lines, and what each style writes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>

#include "ringtrain/core/error.h"
#include "ringtrain/train/progress.h"

using namespace ringtrain;

namespace {

ProgressStats sample_stats() {
  ProgressStats s;
  s.epoch = 1;
  s.epochs = 5;
  s.step = 1200;
  s.total_steps = 4685;
  s.loss = 0.41234;
  s.lr = 0.05;
  s.samples_per_s = 12345;
  s.step_s = 0.01042;
  s.compute_s = 0.0071;
  s.exposed_comm_s = 0.0012;
  s.data_wait_s = 0.0003;
  s.eta_s = 192;
  return s;
}

std::string written(const std::function<void(std::FILE*)>& f) {
  std::FILE* tmp = std::tmpfile();
  REQUIRE(tmp);
  f(tmp);
  std::fflush(tmp);
  std::rewind(tmp);
  std::string out;
  char buf[512];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, tmp)) > 0) out.append(buf, n);
  std::fclose(tmp);
  return out;
}

}  // namespace

TEST_CASE("the progress line shows epoch, step, loss, lr, throughput, the step split and ETA") {
  CHECK(format_progress_line(sample_stats()) ==
        "epoch 2/5  step 1200/4685 (25.6%)  loss 0.4123  lr 0.05  12.3k samples/s  "
        "step 10.4 ms = compute 7.10 (68%) + comm 1.20 (12%) + data 0.30 (3%)  ETA 3m12s");

  // Unknown totals, no timing yet, no ETA yet.
  ProgressStats s;
  s.step = 3;
  s.loss = 2.302585;
  s.lr = 1e-4;
  s.samples_per_s = 950;
  CHECK(format_progress_line(s) ==
        "epoch 1  step 3  loss 2.3026  lr 0.0001  950 samples/s  ETA --");

  s.loss = NAN;
  CHECK_THAT(format_progress_line(s), Catch::Contains("loss nan"));
  s.loss = 12345.678;
  CHECK_THAT(format_progress_line(s), Catch::Contains("loss 1.235e+04"));
  s.loss = 0.000012;
  CHECK_THAT(format_progress_line(s), Catch::Contains("loss 1.2e-05"));
  s.lr = 3.2e-5;
  CHECK_THAT(format_progress_line(s), Catch::Contains("lr 3.2e-05"));
}

TEST_CASE("a narrow terminal gets a compact line that fits") {
  const ProgressStats s = sample_stats();
  const std::string full = format_progress_line(s);
  CHECK(format_progress_line(s, full.size()) == full);
  const std::string compact = format_progress_line(s, 105);
  CHECK(compact.size() <= 105);
  CHECK(compact ==
        "epoch 2/5  step 1200/4685 (25.6%)  loss 0.4123  lr 0.05  12.3k samples/s  10.4ms c68% "
        "m12% d3%  ETA 3m12s");
  const std::string narrow = format_progress_line(s, 64);
  CHECK(narrow == "step 1200/4685 (25.6%)  loss 0.4123  12.3k samples/s  ETA 3m12s");
  CHECK(format_progress_line(s, 20).size() == 20);
}

TEST_CASE("durations and rates are short and readable") {
  CHECK(format_duration(0) == "0.0s");
  CHECK(format_duration(0.84) == "0.8s");
  CHECK(format_duration(9.94) == "9.9s");
  CHECK(format_duration(45.4) == "45s");
  CHECK(format_duration(59.6) == "1m00s");
  CHECK(format_duration(187) == "3m07s");
  CHECK(format_duration(7500) == "2h05m");
  CHECK(format_duration(3 * 86400 + 4 * 3600 + 59) == "3d04h");
  CHECK(format_duration(-1) == "--");
  CHECK(format_duration(INFINITY) == "--");
  CHECK(format_duration(NAN) == "--");

  CHECK(format_rate(0) == "0");
  CHECK(format_rate(950.4) == "950");
  CHECK(format_rate(999.6) == "1.0k");
  CHECK(format_rate(12345) == "12.3k");
  CHECK(format_rate(4.56e6) == "4.56M");
  CHECK(format_rate(NAN) == "--");
}

TEST_CASE("the ETA follows recent step times") {
  EtaEstimator eta(0.5);
  CHECK_FALSE(eta.eta_s(100));
  eta.update(0, 10.0);
  CHECK_FALSE(eta.eta_s(100));  // one point: no rate yet
  eta.update(10, 12.0);         // 0.2 s/step
  REQUIRE(eta.eta_s(100));
  CHECK(*eta.eta_s(100) == Approx(90 * 0.2));
  eta.update(20, 13.0);  // 0.1 s/step: average (0.5 * 0.1 + 0.5 * 0.2)
  CHECK(*eta.seconds_per_step() == Approx(0.15));
  CHECK(*eta.eta_s(100) == Approx(80 * 0.15));
  eta.update(20, 20.0);  // no progress: only the baseline moves
  CHECK(*eta.seconds_per_step() == Approx(0.15));
  eta.update(30, 21.5);
  CHECK(*eta.seconds_per_step() == Approx(0.15));
  CHECK(*eta.eta_s(30) == 0.0);
  CHECK(*eta.eta_s(10) == 0.0);  // past the end: nothing left
  CHECK_FALSE(eta.eta_s(0));     // total unknown
  CHECK_THROWS_AS(EtaEstimator(0.0), Error);
}

TEST_CASE("redraw only on a real terminal, never under an MPI launcher unless asked") {
  using S = ProgressStyle;
  CHECK(resolve_progress_style(S::automatic, true, nullptr, false, "xterm") == S::redraw);
  CHECK(resolve_progress_style(S::automatic, false, nullptr, false, "xterm") == S::lines);
  CHECK(resolve_progress_style(S::automatic, true, nullptr, true, "xterm") == S::lines);
  CHECK(resolve_progress_style(S::automatic, true, nullptr, false, "dumb") == S::lines);
  CHECK(resolve_progress_style(S::automatic, true, "", false, nullptr) == S::redraw);
  CHECK(resolve_progress_style(S::automatic, false, "redraw", true, "xterm") == S::redraw);
  CHECK(resolve_progress_style(S::automatic, true, "lines", false, "xterm") == S::lines);
  CHECK(resolve_progress_style(S::automatic, true, "auto", true, "xterm") == S::lines);
  CHECK(resolve_progress_style(S::lines, true, "redraw", false, "xterm") == S::lines);
  CHECK(resolve_progress_style(S::redraw, false, nullptr, true, nullptr) == S::redraw);
  CHECK_THROWS_WITH(resolve_progress_style(S::automatic, true, "fancy", false, "xterm"),
                    Catch::Contains("RINGTRAIN_PROGRESS=fancy"));
}

TEST_CASE("redraw style rewrites one line in place and ends it with a newline") {
  ProgressStats s = sample_stats();
  const std::string out = written([&](std::FILE* f) {
    ProgressLine line(true, f, ProgressStyle::redraw);
    CHECK(line.redraws());
    line.update(s);
    s.step = 1201;
    line.update(s);
    line.print("eval: accuracy 0.9012");
    line.finish();
    line.finish();  // idempotent
  });
  s.step = 1200;
  const std::string first = format_progress_line(s);
  s.step = 1201;
  const std::string second = format_progress_line(s);
  CHECK(out == "\r" + first + "\x1b[K" + "\r" + second + "\x1b[K" +
                   "\reval: accuracy 0.9012\x1b[K\n\r" + second + "\x1b[K" + "\n");
}

TEST_CASE("lines style prints one plain line per update") {
  ProgressStats s = sample_stats();
  const std::string out = written([&](std::FILE* f) {
    ProgressLine line(true, f, ProgressStyle::lines);
    CHECK_FALSE(line.redraws());
    line.update(s);
    line.print("eval: accuracy 0.9012");
    line.update(s);
  });  // destruction adds nothing: every line is already complete
  const std::string l = format_progress_line(s);
  CHECK(out == l + "\n" + "eval: accuracy 0.9012\n" + l + "\n");
  CHECK(out.find('\r') == std::string::npos);

  // A file is not a terminal, so automatic means lines; a disabled line is silent.
  CHECK(written([&](std::FILE* f) {
          ProgressLine line(true, f);
          CHECK_FALSE(line.redraws());
        }) == "");
  CHECK(written([&](std::FILE* f) {
          ProgressLine line(false, f, ProgressStyle::redraw);
          line.update(s);
          line.print("x");
        }) == "");
}
