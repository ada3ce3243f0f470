#include "train/nonfinite_guard.h"

#include <fmt/format.h>

#include <vector>

#include "ringtrain/comm/flight_verdict.h"
#include "ringtrain/core/error.h"
#include "ringtrain/core/log.h"
#include "ringtrain/optim/finite_check.h"
#include "ringtrain/train/checkpoint.h"

namespace ringtrain {

NonfiniteGuard::NonfiniteGuard(NonfinitePolicy policy, Communicator& control, const Model& model,
                               std::string ckpt_dir)
    : policy_(policy), control_(control), model_(model), ckpt_dir_(std::move(ckpt_dir)) {}

bool NonfiniteGuard::admit(std::uint64_t step, BufferView grads, std::optional<bool> local_finite) {
  if (all_finite(grads)) {
    consecutive_ = 0;
    return true;
  }
  const std::string what = describe(step, grads, local_finite);
  ++consecutive_;
  if (consecutive_ > policy_.max_consecutive_skips) {
    std::string newest;
    if (!ckpt_dir_.empty()) {
      const auto latest = latest_checkpoint(ckpt_dir_);
      newest = latest ? fmt::format("; the newest good checkpoint is {}", *latest)
                      : fmt::format("; {} holds no checkpoint yet", ckpt_dir_);
    }
    const std::string why = policy_.max_consecutive_skips == 0
                                ? std::string("--nonfinite stop")
                                : fmt::format("{} consecutive bad steps, --nonfinite {}",
                                              consecutive_, policy_.to_string());
    throw Error(fmt::format("{}; stopping ({}): no checkpoint is written from this state{}", what,
                            why, newest));
  }
  ++skipped_;
  log0_line(LogLevel::warn,
            fmt::format("{}; update skipped ({} of at most {} consecutive, {} skipped in all)",
                        what, consecutive_, policy_.max_consecutive_skips, skipped_));
  return false;
}

std::string NonfiniteGuard::describe(std::uint64_t step, BufferView grads,
                                     std::optional<bool> local_finite) {
  // Every rank is here (the average is the same everywhere): one small
  // all-gather says which ranks' own gradients were bad.
  const int size = control_.size();
  std::vector<std::int32_t> flags(static_cast<std::size_t>(size));
  std::int32_t& mine = flags[static_cast<std::size_t>(control_.rank())];
  mine = !local_finite ? -1 : (*local_finite ? 0 : 1);
  control_.allgather(BufferView{&mine, 1, DType::i32, Device::cpu()},
                     BufferView{flags.data(), flags.size(), DType::i32, Device::cpu()});
  std::vector<int> bad, unknown;
  for (int r = 0; r < size; ++r) {
    if (flags[static_cast<std::size_t>(r)] == 1) bad.push_back(r);
    if (flags[static_cast<std::size_t>(r)] == -1) unknown.push_back(r);
  }
  std::string ranks;
  if (!bad.empty())
    ranks = fmt::format("the local gradients of rank{} {} were non-finite",
                        bad.size() > 1 ? "s" : "", format_rank_list(bad));
  else if (unknown.empty())
    ranks = "every rank's local gradients were finite: their average overflowed";
  if (!unknown.empty())
    ranks += fmt::format(
        "{}rank{} {} not known (device gradients are checked after the all-reduce "
        "only)",
        ranks.empty() ? "" : "; ", unknown.size() > 1 ? "s" : "", format_rank_list(unknown));

  std::string tensor = "unknown";
  if (const auto index = first_nonfinite(grads)) {
    for (const ParamInfo& p : model_.param_info())
      if (*index >= p.offset && *index < p.offset + p.count) {
        tensor = fmt::format("{} (layer {} '{}')", p.name, p.layer, model_.layer_name(p.layer));
        break;
      }
  }
  return fmt::format("non-finite gradients at step {}: {}; first non-finite parameter tensor: {}",
                     step, ranks, tensor);
}

}  // namespace ringtrain
