// `--resume latest` walks back from the newest checkpoint to the newest one
// that reads: a file cut short by a full disk or damaged in transit should cost
// the steps since the previous checkpoint, not the whole run.
#include <string>
#include <vector>

#include "ringtrain/core/check.h"
#include "ringtrain/core/log.h"
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
    } catch (const PermissionError& e) {
      // Not damage: the file may well be the newest good state. Falling back
      // past it would silently lose those steps, and train over them.
      throw PermissionError(fmt::format(
          "{}; not falling back to an older checkpoint past it: fix its permissions, or move it "
          "out of {} to use the one before",
          e.what(), dir));
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

namespace ringtrain {

std::string newest_intact_checkpoint_path(const std::string& dir, const std::string& flag) {
  std::vector<SkippedCheckpoint> skipped;
  const std::optional<LoadedCheckpoint> found = read_newest_intact_checkpoint(dir, &skipped);
  RT_CHECK(found.has_value(), "{} {}: the directory holds no complete checkpoint", flag, dir);
  for (const auto& s : skipped)
    log_warn("{}: skipping {}, it cannot be read: {}", flag, s.path, s.reason);
  if (!skipped.empty())
    log_warn("{}: using {}, the newest checkpoint that reads", flag, found->path);
  return found->path;
}

}  // namespace ringtrain
