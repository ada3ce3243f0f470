#include "train/nonfinite_guard.h"

#include <fmt/format.h>

#include <vector>

#include "ringtrain/comm/flight_verdict.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/host_sync.h"
#include "ringtrain/core/log.h"
#include "ringtrain/train/checkpoint.h"

namespace ringtrain {

namespace {

std::string plural(const std::vector<int>& ranks) {
  return ranks.size() > 1 ? "s" : "";
}

}  // namespace

NonfiniteGuard::NonfiniteGuard(NonfinitePolicy policy, Communicator& control, const Model& model,
                               std::string ckpt_dir, Device device, BufferView loss_totals)
    : policy_(policy),
      control_(control),
      model_(model),
      ckpt_dir_(std::move(ckpt_dir)),
      device_(device),
      tracker_(device, policy.max_consecutive_skips, loss_totals) {}

bool NonfiniteGuard::admit(std::uint64_t step, BufferView grads, std::uint64_t samples,
                           void* stream, std::size_t offset, bool grads_is_local) {
  const bool apply = tracker_.decide(step, grads, samples, stream, offset, grads_is_local);
  // The CPU knows now: the same report as a GPU's at its next sync point.
  if (!tracker_.on_device()) report();
  return apply;
}

kernels::LossScalerState NonfiniteGuard::loss_scaler(bool current) {
  if (current && tracker_.on_device())
    host_sync::wait_device(device_, "loss scaler: read the scale");
  return tracker_.observed().scaler;
}

void NonfiniteGuard::sync_and_report() {
  sync();
  report();
}

void NonfiniteGuard::sync() {
  host_sync::wait_device(device_, "non-finite guard: read the decision");
}

std::uint64_t NonfiniteGuard::take_skipped_samples() {
  const std::uint64_t n = seen_.skipped_samples - samples_taken_;
  samples_taken_ = seen_.skipped_samples;
  return n;
}

void NonfiniteGuard::report() {
  const kernels::NonfiniteGuardState s = tracker_.observed();
  const bool stopped = s.stopped != 0 && seen_.stopped == 0;
  const std::uint64_t new_skips = s.skipped - seen_.skipped;
  const std::uint64_t previous_skips_step = seen_.last_bad_step;
  seen_ = s;
  if (!stopped && new_skips == 0) return;
  const std::string what = describe(s);
  if (stopped) {
    std::string newest;
    if (!ckpt_dir_.empty()) {
      const auto latest = latest_checkpoint(ckpt_dir_);
      newest = latest ? fmt::format("; the newest good checkpoint is {}", *latest)
                      : fmt::format("; {} holds no checkpoint yet", ckpt_dir_);
    }
    const std::string why = policy_.max_consecutive_skips == 0
                                ? std::string("--nonfinite stop")
                                : fmt::format("{} consecutive bad steps, --nonfinite {}",
                                              s.consecutive_at_last_bad, policy_.to_string());
    throw Error(fmt::format("{}; stopping ({}): no checkpoint is written from this state{}", what,
                            why, newest));
  }
  // On a GPU several skips may come in one report: the last is described.
  const std::string earlier = new_skips > 1 ? fmt::format("; {} steps skipped since step {}",
                                                          new_skips, previous_skips_step)
                                            : std::string();
  log0_line(
      LogLevel::warn,
      fmt::format("{}; update skipped ({} of at most {} consecutive, {} skipped in all{})", what,
                  s.consecutive_at_last_bad, policy_.max_consecutive_skips, s.skipped, earlier));
}

std::string NonfiniteGuard::describe(const kernels::NonfiniteGuardState& s) {
  // Every rank is here with the same state (the decision is the same
  // everywhere): one small all-gather says which ranks' own values were bad.
  const int size = control_.size();
  std::vector<std::int32_t> flags(static_cast<std::size_t>(size));
  std::int32_t& mine = flags[static_cast<std::size_t>(control_.rank())];
  mine = static_cast<std::int32_t>(s.local_at_last_bad);
  control_.allgather(BufferView{&mine, 1, DType::i32, Device::cpu()},
                     BufferView{flags.data(), flags.size(), DType::i32, Device::cpu()});
  std::vector<int> bad_grads, bad_loss;
  for (int r = 0; r < size; ++r) {
    const auto f = static_cast<unsigned long long>(flags[static_cast<std::size_t>(r)]);
    if (f & kernels::kLocalGradientsBad) bad_grads.push_back(r);
    if (f & kernels::kLocalLossBad) bad_loss.push_back(r);
  }
  const bool loss_only = bad_grads.empty() && !bad_loss.empty();
  std::string ranks;
  if (!bad_grads.empty())
    ranks = fmt::format("the local gradients of rank{} {} were non-finite", plural(bad_grads),
                        format_rank_list(bad_grads));
  if (!bad_loss.empty())
    ranks += fmt::format("{}the local loss of rank{} {} {} non-finite", ranks.empty() ? "" : "; ",
                         plural(bad_loss), format_rank_list(bad_loss),
                         bad_loss.size() > 1 ? "were" : "was");
  if (ranks.empty()) ranks = "every rank's local gradients were finite: their average overflowed";

  // A loss-only step's gradients were finite: its non-finite element is the
  // one the rank wrote to carry the flag through the all-reduce.
  std::string tensor = loss_only ? "none (the gradients were finite)" : "unknown";
  if (!loss_only && s.index_at_last_bad != kernels::kNoNonfiniteIndex) {
    const auto index = static_cast<std::size_t>(s.index_at_last_bad);
    for (const ParamInfo& p : model_.param_info())
      if (index >= p.offset && index < p.offset + p.count) {
        tensor = fmt::format("{} (layer {} '{}')", p.name, p.layer, model_.layer_name(p.layer));
        break;
      }
  }
  return fmt::format("non-finite {} at step {}: {}; first non-finite parameter tensor: {}",
                     loss_only ? "loss" : "gradients", s.last_bad_step, ranks, tensor);
}

}  // namespace ringtrain
