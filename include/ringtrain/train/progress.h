// The rank-0 progress line:
//   epoch 2/5  step 1200/4685 (25.6%)  loss 0.4123  lr 0.05  12.3k samples/s
//   step 10.42 ms = compute 7.10 (68%) + comm 1.20 (12%) + data 0.30 (3%)  ETA 3m12s
// (one line). On a terminal it redraws in place (\r, clear to end of line);
// into a file or pipe it prints one plain line per update.
//
// Under mpirun the ranks' stdout is a pseudo-terminal that Open MPI creates
// even when mpirun's own output goes to a file, so isatty() cannot be trusted
// there: plain lines are the default under an MPI launcher, and
// RINGTRAIN_PROGRESS=redraw|lines|auto overrides the choice.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace ringtrain {

// Everything the line shows; times are means per step over the last window.
struct ProgressStats {
  std::uint64_t epoch = 0;        // zero-based; shown as epoch + 1
  std::uint64_t epochs = 0;       // total; 0 = not known (a --max-steps run)
  std::uint64_t step = 0;         // global optimizer steps done
  std::uint64_t total_steps = 0;  // 0 = not known
  double loss = 0;
  double lr = 0;
  double samples_per_s = 0;   // global: all ranks together
  double step_s = 0;          // wall time per step
  double compute_s = 0;       // forward + backward + optimizer
  double exposed_comm_s = 0;  // communication the step waited for (not hidden by overlap)
  double data_wait_s = 0;     // waiting for the next batch
  std::optional<double> eta_s;
  std::uint64_t skipped_steps = 0;  // non-finite steps skipped (--nonfinite skip:N); shown when > 0
  double loss_scale = 0;            // fp16's loss scale; shown when > 0 (when it changed)
};

// The line, at most `max_width` characters (0 = no limit; a redrawn line
// longer than the terminal would wrap and break the \r redraw).
std::string format_progress_line(const ProgressStats& stats, std::size_t max_width = 0);

// "0.8s", "45s", "3m07s", "2h05m", "3d04h"; "--" for a negative or non-finite value.
std::string format_duration(double seconds);
// "950", "12.3k", "4.56M"
std::string format_rate(double per_second);

// A running estimate of the time left: an exponential moving average of the
// seconds per step between updates, so a slow start (warm-up, first
// evaluation) fades instead of skewing the estimate for the whole run.
class EtaEstimator {
 public:
  explicit EtaEstimator(double smoothing = 0.3);
  // At each log point: steps done so far and monotonic_seconds().
  void update(std::uint64_t step, double now_s);
  // Seconds for the steps left until `total_steps`; empty until two updates
  // with progress between them.
  std::optional<double> eta_s(std::uint64_t total_steps) const;
  std::optional<double> seconds_per_step() const { return seconds_per_step_; }

 private:
  double smoothing_;
  std::optional<std::uint64_t> last_step_;
  double last_time_s_ = 0;
  std::uint64_t step_ = 0;
  std::optional<double> seconds_per_step_;
};

enum class ProgressStyle { automatic, redraw, lines };

// How the line is drawn. `requested` wins unless automatic; then the
// RINGTRAIN_PROGRESS value (if set: "redraw", "lines" or "auto"), then: redraw
// only on a terminal that is not dumb and not under an MPI launcher.
// Throws Error for an unknown RINGTRAIN_PROGRESS value.
ProgressStyle resolve_progress_style(ProgressStyle requested, bool is_tty, const char* env_value,
                                     bool under_mpi_launcher, const char* term);

class ProgressLine {
 public:
  // `enabled` is normally "this is rank 0"; a disabled line prints nothing.
  // Style automatic resolves from `out`'s file descriptor and the environment.
  explicit ProgressLine(bool enabled, std::FILE* out = stdout,
                        ProgressStyle style = ProgressStyle::automatic);
  ~ProgressLine();
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool redraws() const { return style_ == ProgressStyle::redraw; }

  // Shows `stats` (redrawn in place, or as a new line).
  void update(const ProgressStats& stats);
  // A permanent line (an evaluation result, a checkpoint note) printed above
  // the progress line, which is then redrawn.
  void print(const std::string& message);
  // Ends a line left open by a redraw, so later output starts on its own line.
  void finish();

 private:
  void write(const std::string& text);
  std::size_t width() const;

  bool enabled_;
  std::FILE* out_;
  ProgressStyle style_;
  std::string current_;  // the line on screen, for redraw after print()
  bool open_ = false;    // a redrawn line without its newline yet
};

}  // namespace ringtrain
