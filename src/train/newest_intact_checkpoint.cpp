// `--resume latest` walks back from the newest checkpoint to the newest one
// that reads: a file cut short by a full disk or damaged in transit should cost
// the steps since the previous checkpoint, not the whole run.
#include <string>
#include <vector>

#include "ringtrain/core/check.h"
#include "ringtrain/train/checkpoint.h"

namespace ringtrain {

std::optional<LoadedCheckpoint> read_newest_intact_checkpoint(
    const std::string& dir, std::vector<SkippedCheckpoint>* skipped) {
  const auto all = list_checkpoints(dir);
  std::vector<SkippedCheckpoint> bad;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      LoadedCheckpoint ck = read_checkpoint(it->second);
      if (skipped) *skipped = std::move(bad);
      return ck;
    } catch (const Error& e) {
      bad.push_back({it->second, e.what()});
    }
  }
  if (skipped) *skipped = bad;
  if (all.empty()) return std::nullopt;
  std::string reasons;
  for (const auto& b : bad) reasons += "\n  " + b.reason;
  RT_CHECK(false, "--resume latest: none of the {} checkpoint(s) in {} can be read:{}", all.size(),
           dir, reasons);
  return std::nullopt;
}

}  // namespace ringtrain
