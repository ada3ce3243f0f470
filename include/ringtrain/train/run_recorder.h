// What a training run leaves behind for people: the rank-0 progress line,
// metrics.jsonl and TensorBoard events under --logdir, and the Chrome trace of
// every rank (--trace). The trainer reports events; this decides where they go.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/launch/topology.h"
#include "ringtrain/train/evaluator.h"
#include "ringtrain/train/progress.h"
#include "ringtrain/train/train_config.h"
#include "ringtrain/train/trainer.h"

namespace ringtrain {

// A new id per launch of a training run, written into every metrics.jsonl
// record ("run_id").
std::string make_run_id();

// Seconds spent in each phase of one optimizer step, on this rank.
struct StepTiming {
  double total = 0;
  double data_wait = 0;  // blocked on the prefetcher
  double forward = 0;
  double backward = 0;      // includes launching overlapped all-reduces
  double optimizer = 0;     // clipping and the update
  double exposed_comm = 0;  // waiting for buckets after backward: what overlap did not hide
  double comm_span = 0;     // first bucket launched to last bucket done
  double grad_norm = -1;    // before clipping, when --clip-norm is set
  // Host waits on the device (host_sync) in this step, the loss read of a
  // logged step included: 0 in a steady step, 1 when it logs.
  std::uint64_t host_syncs = 0;
  // The same, summed over the steps since the previous logged one.
  std::uint64_t host_syncs_between_logs = 0;
  // Steps whose update --nonfinite skip:N skipped so far in this run.
  std::uint64_t skipped_steps = 0;
  // --precision fp16: the loss scale after the step, and the steps skipped
  // for an overflow so far (0 and 0 without loss scaling).
  double loss_scale = 0;
  std::uint64_t overflow_steps = 0;
  // Bytes this rank handed to the gradient collectives in the step, in the
  // wire dtype (--grad-dtype): the buckets' all-reduces; under --zero 1 the
  // reduce-scatters' padded inputs plus the parameter all-gathers' outputs.
  std::uint64_t allreduce_bytes = 0;
};

// The steps since the previous logged one (the progress window). A logged
// step's own time is one sample of a shared machine's noise; the window's
// mean and median are the figures to compare runs by.
struct StepWindow {
  std::uint64_t steps = 0;
  double step_s_mean = 0;    // training steps only: evaluations and checkpoints excluded
  double step_s_median = 0;  // robust to a slow spell of the machine
  double samples_per_s = 0;  // samples trained in the window over its steps' time
  double tokens_per_s = 0;   // a language model's tokens (samples x context); 0 otherwise
  double exposed_comm_s_mean = 0;
};

// When one micro-batch's phases began and ended (monotonic_seconds()).
struct MicroBatchTimes {
  double data = 0;  // waiting for the prefetcher
  double forward = 0;
  double backward = 0;
  double end = 0;
};

class GradientSynchronizer;
class MetricsLog;
struct StragglerReport;
class TensorBoardWriter;
class TraceWriter;

class RunRecorder {
 public:
  // resume_step: the checkpoint step a resumed run starts from (metrics and
  // TensorBoard drop what an interrupted run logged after it).
  RunRecorder(const TrainConfig& config, const Topology& topology, std::uint64_t total_steps,
              std::optional<std::uint64_t> resume_step);
  ~RunRecorder();

  // Rank 0 logs; loss is the global mean over the steps since the last call,
  // timing the logged step's own phases.
  void on_step(std::uint64_t step, std::uint64_t epoch, float lr, double loss,
               const StepTiming& timing, const StepWindow& window);
  void on_eval(std::uint64_t step, const EvalResult& result, double seconds);
  void on_checkpoint(std::uint64_t step, const std::string& path);
  // Bytes of optimizer state this rank holds (--zero 1 shards it), written
  // with every train record.
  void set_optimizer_state_bytes(std::uint64_t bytes) { optimizer_state_bytes_ = bytes; }
  // --straggler-every: the per-rank step times, the slowest rank and its
  // phases (metrics.jsonl, TensorBoard) and, when one is slow, a progress line.
  void on_stragglers(const StragglerReport& report);
  // The step's spans in this rank's trace (--trace; nothing without it).
  void trace_micro_batch(const MicroBatchTimes& times);
  // After GradientSynchronizer::finish(): when each bucket's gradients were
  // complete, with its size (the step model, `ringtrain bench predict`, reads
  // these back), and each bucket's all-reduce.
  void trace_gradient_sync(const GradientSynchronizer& sync);
  void trace_optimizer(double start_s, double end_s);
  // Collective over `control`: gathers every rank's trace to rank 0, which
  // writes --trace; closes the logs.
  void finish(Communicator& control, const TrainSummary& summary);

 private:
  const TrainConfig& config_;
  int rank_;
  std::uint64_t total_steps_;
  std::uint64_t optimizer_state_bytes_ = 0;
  std::uint64_t first_step_;
  double start_s_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  std::unique_ptr<TraceWriter> trace_;
  std::unique_ptr<ProgressLine> progress_;
  EtaEstimator eta_;
  double shown_loss_scale_ = 0;  // the loss scale the progress line last showed
};

}  // namespace ringtrain
