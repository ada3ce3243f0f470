#include "ringtrain/train/run_recorder.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <random>

#include <nlohmann/json.hpp>

#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
#include "ringtrain/core/timer.h"
#include "ringtrain/sync/gradient_sync.h"
#include "ringtrain/train/metrics_log.h"
#include "ringtrain/train/progress.h"
#include "ringtrain/train/straggler_monitor.h"
#include "ringtrain/train/tensorboard_writer.h"
#include "ringtrain/train/trace_writer.h"

namespace ringtrain {

// "20261128T063300Z-3f9a1c2e": when this launch started (UTC), and 32 random
// bits, so that two launches in one second differ too.
std::string make_run_id() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char when[32] = {};
  std::strftime(when, sizeof(when), "%Y%m%dT%H%M%SZ", &utc);
  std::random_device random;
  return fmt::format("{}-{:08x}", when, static_cast<std::uint32_t>(random()));
}

RunRecorder::RunRecorder(const TrainConfig& config, const Topology& topology,
                         std::uint64_t total_steps, std::optional<std::uint64_t> resume_step)
    : config_(config),
      rank_(topology.rank()),
      total_steps_(total_steps),
      first_step_(resume_step.value_or(0)),
      start_s_(monotonic_seconds()),
      trace_(std::make_unique<TraceWriter>(topology.rank(), !config.trace.empty())),
      progress_(std::make_unique<ProgressLine>(topology.rank() == 0)) {
  if (rank_ == 0 && !config.logdir.empty()) {
    std::filesystem::create_directories(config.logdir);
    metrics_ = std::make_unique<MetricsLog>(config.logdir + "/metrics.jsonl", resume_step);
    metrics_->set_run_id(make_run_id());
    tensorboard_ = std::make_unique<TensorBoardWriter>(config.logdir, resume_step);
  }
}

RunRecorder::~RunRecorder() = default;

void RunRecorder::on_step(std::uint64_t step, std::uint64_t epoch, float lr, double loss,
                          const StepTiming& t, const StepWindow& window) {
  const double samples_per_second = window.samples_per_s;
  if (rank_ != 0) return;
  const double compute = t.forward + t.backward + t.optimizer;
  if (config_.log_every > 0) {
    ProgressStats s;
    s.epoch = epoch;
    s.epochs = config_.max_steps > 0 ? 0 : config_.epochs;
    s.step = step;
    s.total_steps = total_steps_;
    s.loss = loss;
    s.lr = lr;
    s.samples_per_s = samples_per_second;
    s.tokens_per_s = window.tokens_per_s;
    s.step_s = t.total;
    s.compute_s = compute;
    s.exposed_comm_s = t.exposed_comm;
    s.data_wait_s = t.data_wait;
    s.skipped_steps = t.skipped_steps;
    // The scale is shown when it changes (and on the first line).
    if (t.loss_scale > 0 && t.loss_scale != shown_loss_scale_) {
      s.loss_scale = t.loss_scale;
      shown_loss_scale_ = t.loss_scale;
    }
    eta_.update(step, monotonic_seconds());
    s.eta_s = eta_.eta_s(total_steps_);
    progress_->update(s);
  }
  if (metrics_) {
    nlohmann::json r = {{"kind", "train"},
                        {"step", step},
                        {"epoch", epoch},
                        {"loss", loss},
                        {"lr", lr},
                        {"samples_per_s", samples_per_second},
                        {"tokens_per_s", window.tokens_per_s},
                        {"step_s", t.total},
                        {"window_steps", window.steps},
                        {"window_step_s", window.step_s_mean},
                        {"window_step_s_median", window.step_s_median},
                        {"window_exposed_comm_s", window.exposed_comm_s_mean},
                        {"forward_s", t.forward},
                        {"backward_s", t.backward},
                        {"optimizer_s", t.optimizer},
                        {"compute_s", compute},
                        {"exposed_comm_s", t.exposed_comm},
                        {"comm_s", t.comm_span},
                        {"data_wait_s", t.data_wait},
                        {"host_syncs", t.host_syncs},
                        {"host_syncs_between_logs", t.host_syncs_between_logs},
                        {"elapsed_s", monotonic_seconds() - start_s_}};
    if (t.grad_norm >= 0) r["grad_norm"] = t.grad_norm;
    r["skipped_steps"] = t.skipped_steps;
    if (t.loss_scale > 0) {
      r["loss_scale"] = t.loss_scale;
      r["overflow_steps"] = t.overflow_steps;
    }
    r["allreduce_bytes"] = t.allreduce_bytes;
    r["optimizer_state_bytes"] = optimizer_state_bytes_;
    metrics_->write(r);
  }
  if (tensorboard_) {
    std::vector<std::pair<std::string, double>> values = {
        {"train/loss", loss},
        {"train/lr", lr},
        {"train/samples_per_s", samples_per_second},
        {"time/step_ms", t.total * 1e3},
        {"time/compute_ms", compute * 1e3},
        {"time/exposed_comm_ms", t.exposed_comm * 1e3},
        {"time/allreduce_ms", t.comm_span * 1e3},
        {"time/data_wait_ms", t.data_wait * 1e3}};
    if (t.grad_norm >= 0) values.emplace_back("train/grad_norm", t.grad_norm);
    values.emplace_back("train/skipped_steps", static_cast<double>(t.skipped_steps));
    if (t.loss_scale > 0) values.emplace_back("train/loss_scale", t.loss_scale);
    tensorboard_->add_scalars(step, values);
  }
}

void RunRecorder::on_eval(std::uint64_t step, const EvalResult& r, double seconds) {
  if (rank_ != 0) return;
  if (r.tokens > 0) {
    progress_->print(fmt::format(
        "eval at step {}: loss {:.4f} per token, perplexity {:.3f}, next-token accuracy {:.4f} "
        "over {} tokens ({} windows, {:.1f}s)",
        step, r.loss, r.perplexity, r.accuracy, r.tokens, r.n, seconds));
  } else {
    progress_->print(
        fmt::format("eval at step {}: accuracy {:.4f}, loss {:.4f} over {} samples ({:.1f}s)", step,
                    r.accuracy, r.loss, r.n, seconds));
  }
  if (metrics_) {
    nlohmann::json e = {{"kind", "eval"},    {"step", step},   {"split", config_.eval_split},
                        {"n", r.n},          {"loss", r.loss}, {"accuracy", r.accuracy},
                        {"seconds", seconds}};
    if (r.tokens > 0) {
      e["tokens"] = r.tokens;
      e["perplexity"] = r.perplexity;
    }
    metrics_->write(e);
  }
  if (tensorboard_) {
    std::vector<std::pair<std::string, double>> values = {{"eval/accuracy", r.accuracy},
                                                          {"eval/loss", r.loss}};
    if (r.tokens > 0) values.emplace_back("eval/perplexity", r.perplexity);
    tensorboard_->add_scalars(step, values);
  }
}

void RunRecorder::on_checkpoint(std::uint64_t step, const std::string& path) {
  if (rank_ != 0) return;
  progress_->print(fmt::format("checkpoint at step {}: {}", step, path));
  if (metrics_) metrics_->write({{"kind", "checkpoint"}, {"step", step}, {"path", path}});
}

void RunRecorder::on_stragglers(const StragglerReport& report) {
  if (rank_ != 0) return;
  if (report.finding) progress_->print(*report.finding);
  const PhaseTimes& slow = report.per_rank.at(static_cast<std::size_t>(report.slowest_rank));
  if (metrics_) {
    nlohmann::json step_s = nlohmann::json::array();
    for (const PhaseTimes& p : report.per_rank) step_s.push_back(p.step);
    metrics_->write(
        {{"kind", "stragglers"},
         {"step", report.step},
         {"step_s", step_s},
         {"median_step_s", report.median_step},
         {"slowest_rank", report.slowest_rank},
         {"slowest",
          {{"step_s", slow.step},
           {"data_wait_s", slow.data_wait},
           {"forward_s", slow.forward},
           {"backward_s", slow.backward},
           {"exposed_comm_s", slow.exposed_comm},
           {"optimizer_s", slow.optimizer}}},
         {"finding", report.finding ? nlohmann::json(*report.finding) : nlohmann::json()}});
  }
  if (tensorboard_) {
    std::vector<std::pair<std::string, double>> values = {
        {"stragglers/slowest_rank", report.slowest_rank},
        {"stragglers/median_step_ms", report.median_step * 1e3},
        {"stragglers/slowest_step_ms", slow.step * 1e3},
        {"stragglers/slowest_data_wait_ms", slow.data_wait * 1e3},
        {"stragglers/slowest_forward_ms", slow.forward * 1e3},
        {"stragglers/slowest_backward_ms", slow.backward * 1e3},
        {"stragglers/slowest_exposed_comm_ms", slow.exposed_comm * 1e3},
        {"stragglers/slowest_optimizer_ms", slow.optimizer * 1e3}};
    for (std::size_t r = 0; r < report.per_rank.size(); ++r)
      values.emplace_back(fmt::format("stragglers/step_ms/rank_{}", r),
                          report.per_rank[r].step * 1e3);
    tensorboard_->add_scalars(report.step, values);
  }
}

void RunRecorder::trace_micro_batch(const MicroBatchTimes& t) {
  if (!trace_->enabled()) return;
  trace_->span("forward", "compute", t.forward, t.backward);
  trace_->span("backward", "compute", t.backward, t.end);
  trace_->span("data wait", "data", t.data, t.forward);
}

void RunRecorder::trace_gradient_sync(const GradientSynchronizer& sync) {
  if (!trace_->enabled()) return;
  // The gradient buffer is f32 (--grad-dtype changes only what travels).
  for (const BucketReady& r : sync.ready())
    trace_->span(fmt::format("bucket {} ready", r.bucket), "gradients", r.ready_s, r.ready_s,
                 {{"bytes", sync.plan().buckets()[r.bucket].count * dtype_size(DType::f32)}});
  for (const BucketTiming& b : sync.timings()) {
    trace_->span(fmt::format("allreduce bucket {}", b.bucket), "comm", b.launched_s, b.done_s);
    // Where the backend can tell, when it really ran: the span above ends
    // only when this rank looked, after its backward.
    if (b.finished_s >= 0)
      trace_->span(fmt::format("allreduce bucket {} ran", b.bucket), "comm thread", b.began_s,
                   b.finished_s);
  }
}

void RunRecorder::trace_optimizer(double start_s, double end_s) {
  trace_->span("optimizer", "compute", start_s, end_s);
}

void RunRecorder::finish(Communicator& control, const TrainSummary& summary) {
  if (rank_ == 0) {
    progress_->finish();
    // No accuracy of nothing: with an empty eval split (warned about at
    // start-up) the figures are null, not 0, and test_n says why.
    const bool evaluated = summary.test_n > 0;
    if (metrics_)
      metrics_->write(
          {{"kind", "summary"},
           {"step", summary.steps},
           {"epochs", summary.epochs},
           {"test_accuracy",
            evaluated ? nlohmann::json(summary.test_accuracy) : nlohmann::json(nullptr)},
           {"test_loss", evaluated ? nlohmann::json(summary.test_loss) : nlohmann::json(nullptr)},
           {"test_n", summary.test_n},
           {"samples_per_s", summary.samples_per_second},
           {"step_s_median", summary.step_s_median},
           {"median_steps", summary.median_steps},
           {"stopped_by_signal", summary.stopped_by_signal}});
  }
  if (config_.trace.empty()) return;
  // Gather every rank's trace document over the control channel (ranks need
  // not share a file system): lengths first, then the bytes padded to 8.
  const std::string mine = trace_->serialize();
  const int world = control.size();
  std::vector<std::uint64_t> lengths(static_cast<std::size_t>(world));
  std::uint64_t my_length = mine.size();
  control.allgather(BufferView{&my_length, 1, DType::i64, Device::cpu()},
                    BufferView{lengths.data(), lengths.size(), DType::i64, Device::cpu()});
  std::uint64_t longest = 0;
  for (auto l : lengths) longest = std::max(longest, l);
  const std::size_t words = static_cast<std::size_t>((longest + 7) / 8);
  std::vector<std::uint64_t> send(words, 0);
  std::memcpy(send.data(), mine.data(), mine.size());
  std::vector<std::uint64_t> all(words * static_cast<std::size_t>(world), 0);
  control.allgather(BufferView{send.data(), words, DType::i64, Device::cpu()},
                    BufferView{all.data(), all.size(), DType::i64, Device::cpu()});
  if (rank_ != 0) return;
  std::vector<std::string> documents;
  for (int q = 0; q < world; ++q)
    documents.emplace_back(
        reinterpret_cast<const char*>(all.data() + static_cast<std::size_t>(q) * words),
        static_cast<std::size_t>(lengths[static_cast<std::size_t>(q)]));
  const std::string merged = merge_traces(documents);
  const std::filesystem::path path(config_.trace);
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::FILE* f = std::fopen(config_.trace.c_str(), "wb");
  RT_CHECK(f != nullptr, "--trace {}: cannot open for writing: {}", config_.trace,
           std::strerror(errno));
  const bool ok = std::fwrite(merged.data(), 1, merged.size(), f) == merged.size();
  RT_CHECK(std::fclose(f) == 0 && ok, "--trace {}: write failed", config_.trace);
  log0("trace of {} rank(s) written to {}", world, config_.trace);
}

}  // namespace ringtrain
