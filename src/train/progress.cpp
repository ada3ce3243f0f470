#include "ringtrain/train/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

namespace {

std::string format_ms(double seconds) {
  const double ms = seconds * 1e3;
  if (ms < 10) return fmt::format("{:.2f}", ms);
  if (ms < 100) return fmt::format("{:.1f}", ms);
  return fmt::format("{:.0f}", ms);
}

std::string format_loss(double loss) {
  if (!std::isfinite(loss)) return fmt::format("{}", loss);  // nan, inf: say so plainly
  if (std::abs(loss) >= 1000 || (loss != 0 && std::abs(loss) < 1e-3))
    return fmt::format("{:.4g}", loss);
  return fmt::format("{:.4f}", loss);
}

double percent(double part, double whole) {
  return whole > 0 ? 100.0 * part / whole : 0.0;
}

// The step-time split, in a full and a compact form (for narrow terminals).
std::string timing_segment(const ProgressStats& s, bool compact) {
  if (!(s.step_s > 0)) return {};
  if (compact)
    return fmt::format("{}ms c{:.0f}% m{:.0f}% d{:.0f}%", format_ms(s.step_s),
                       percent(s.compute_s, s.step_s), percent(s.exposed_comm_s, s.step_s),
                       percent(s.data_wait_s, s.step_s));
  return fmt::format("step {} ms = compute {} ({:.0f}%) + comm {} ({:.0f}%) + data {} ({:.0f}%)",
                     format_ms(s.step_s), format_ms(s.compute_s), percent(s.compute_s, s.step_s),
                     format_ms(s.exposed_comm_s), percent(s.exposed_comm_s, s.step_s),
                     format_ms(s.data_wait_s), percent(s.data_wait_s, s.step_s));
}

std::string join(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += "  ";
    out += p;
  }
  return out;
}

}  // namespace

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "--";
  if (seconds < 10) return fmt::format("{:.1f}s", seconds);
  const auto s = static_cast<std::uint64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  if (s < 86400) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  return fmt::format("{}d{:02}h", s / 86400, (s % 86400) / 3600);
}

std::string format_rate(double per_second) {
  if (!std::isfinite(per_second) || per_second < 0) return "--";
  if (per_second < 999.5) return fmt::format("{:.0f}", per_second);
  if (per_second < 999.95e3) return fmt::format("{:.1f}k", per_second / 1e3);
  return fmt::format("{:.2f}M", per_second / 1e6);
}

std::string format_progress_line(const ProgressStats& s, std::size_t max_width) {
  const std::string epoch = s.epochs > 0 ? fmt::format("epoch {}/{}", s.epoch + 1, s.epochs)
                                         : fmt::format("epoch {}", s.epoch + 1);
  const std::string step = s.total_steps > 0
                               ? fmt::format("step {}/{} ({:.1f}%)", s.step, s.total_steps,
                                             percent(double(s.step), double(s.total_steps)))
                               : fmt::format("step {}", s.step);
  const std::string loss = "loss " + format_loss(s.loss);
  const std::string lr = fmt::format("lr {:.3g}", s.lr);
  const std::string rate = format_rate(s.samples_per_s) + " samples/s";
  const std::string eta = "ETA " + (s.eta_s ? format_duration(*s.eta_s) : std::string("--"));
  const std::string skipped =
      s.skipped_steps > 0 ? fmt::format("skipped {} non-finite", s.skipped_steps) : std::string();

  const std::string scale =
      s.loss_scale > 0 ? fmt::format("loss scale {:g}", s.loss_scale) : std::string();

  std::string line =
      join({epoch, step, loss, lr, rate, timing_segment(s, false), eta, skipped, scale});
  if (max_width == 0 || line.size() <= max_width) return line;
  line = join({epoch, step, loss, lr, rate, timing_segment(s, true), eta, skipped, scale});
  if (line.size() <= max_width) return line;
  line = join({step, loss, rate, eta, skipped, scale});
  if (line.size() > max_width) line.resize(max_width);
  return line;
}

// ---------------------------------------------------------------------------

EtaEstimator::EtaEstimator(double smoothing) : smoothing_(smoothing) {
  RT_CHECK(smoothing > 0 && smoothing <= 1, "progress: ETA smoothing must be in (0, 1], got {}",
           smoothing);
}

void EtaEstimator::update(std::uint64_t step, double now_s) {
  if (last_step_ && step > *last_step_ && now_s >= last_time_s_) {
    const double per_step = (now_s - last_time_s_) / static_cast<double>(step - *last_step_);
    seconds_per_step_ = seconds_per_step_
                            ? smoothing_ * per_step + (1 - smoothing_) * *seconds_per_step_
                            : per_step;
  }
  // A step that did not advance (a repeated call, a resume) only moves the baseline.
  last_step_ = step;
  last_time_s_ = now_s;
  step_ = step;
}

std::optional<double> EtaEstimator::eta_s(std::uint64_t total_steps) const {
  if (!seconds_per_step_ || total_steps == 0) return std::nullopt;
  const std::uint64_t left = total_steps > step_ ? total_steps - step_ : 0;
  return static_cast<double>(left) * *seconds_per_step_;
}

// ---------------------------------------------------------------------------

ProgressStyle resolve_progress_style(ProgressStyle requested, bool is_tty, const char* env_value,
                                     bool under_mpi_launcher, const char* term) {
  if (requested != ProgressStyle::automatic) return requested;
  if (env_value && *env_value) {
    const std::string v = env_value;
    if (v == "redraw") return ProgressStyle::redraw;
    if (v == "lines") return ProgressStyle::lines;
    RT_CHECK(v == "auto", "RINGTRAIN_PROGRESS={} is not one of redraw, lines, auto", v);
  }
  const bool dumb = term && std::strcmp(term, "dumb") == 0;
  return is_tty && !dumb && !under_mpi_launcher ? ProgressStyle::redraw : ProgressStyle::lines;
}

namespace {
bool under_mpi_launcher() {
  // Open MPI, and PMIx-based launchers (srun --mpi=pmix, prterun).
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK"})
    if (std::getenv(var)) return true;
  return false;
}
}  // namespace

ProgressLine::ProgressLine(bool enabled, std::FILE* out, ProgressStyle style)
    : enabled_(enabled), out_(out), style_(ProgressStyle::lines) {
  if (!enabled_) return;
  RT_CHECK(out_ != nullptr, "progress: no output stream");
  const int fd = ::fileno(out_);
  style_ = resolve_progress_style(style, fd >= 0 && ::isatty(fd), std::getenv("RINGTRAIN_PROGRESS"),
                                  under_mpi_launcher(), std::getenv("TERM"));
}

ProgressLine::~ProgressLine() {
  finish();
}

std::size_t ProgressLine::width() const {
  if (style_ != ProgressStyle::redraw) return 0;
  winsize ws{};
  if (::ioctl(::fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1) return ws.ws_col - 1u;
  return 0;
}

void ProgressLine::write(const std::string& text) {
  // Progress output never stops training: a closed stdout is ignored.
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fflush(out_);
}

void ProgressLine::update(const ProgressStats& stats) {
  if (!enabled_) return;
  current_ = format_progress_line(stats, width());
  if (style_ == ProgressStyle::redraw) {
    write("\r" + current_ + "\x1b[K");
    open_ = true;
  } else {
    write(current_ + "\n");
  }
}

void ProgressLine::print(const std::string& message) {
  if (!enabled_) return;
  if (style_ == ProgressStyle::redraw && open_) {
    write("\r" + message + "\x1b[K\n\r" + current_ + "\x1b[K");
  } else {
    write(message + "\n");
  }
}

void ProgressLine::finish() {
  if (!enabled_ || !open_) return;
  write("\n");
  open_ = false;
}

}  // namespace ringtrain
