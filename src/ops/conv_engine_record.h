// Which cuDNN engine each convolution shape runs, once chosen by time
// (gpu_conv_plan.cpp's ConvGraphCache::choose), remembered for the process
// and in a file.
//
// A choice by time could follow timing noise between runs: two runs of one
// job, a run and its resumption, or two ranks would then run different
// engines and stop repeating bit for bit. The record makes the first choice
// on a machine the choice of every later run there: a line "key<TAB>engine"
// appended to the file, the last line of a key winning on reading (a choice
// made again, where a remembered engine is no longer offered, supersedes the
// old line). A decision holds an exclusive lock on the file (flock) from
// reading it to appending, so ranks that reach one shape at once take the
// first one's choice instead of each timing its own. The key names the GPU,
// the cuDNN version, the heuristics mode and the shape, so another GPU model
// or cuDNN chooses again. A file that cannot be read or written costs the
// cross-run memory only, said once. (Ranks on nodes that share no file
// system may still choose differently on a first run: their numbers then
// differ by the engines' rounding, and the replicas stay in step, since
// every rank applies the same averaged gradient.)
#pragma once

#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>

namespace ringtrain::detail {

class EngineChoiceRecord {
 public:
  // path "": the process's memory alone.
  explicit EngineChoiceRecord(std::string path);

  // The engine for key: choose(kept) is called with the remembered engine
  // (the file read again under its lock), or none, and returns the engine it
  // runs: the kept one, a new one (remembered and appended), or "" (nothing
  // to remember: the choice was not timed). Returns choose's answer.
  std::string decide(
      const std::string& key,
      const std::function<std::string(const std::optional<std::string>& kept)>& choose);
  // The engine remembered for key (the file is read on the first call).
  std::optional<std::string> find(const std::string& key);
  // Remembers key's engine here and, where it is new for the key, appends it.
  void remember(const std::string& key, const std::string& engine);
  const std::string& path() const { return path_; }

 private:
  void parse(const std::string& text);
  void load_once();
  void warn_once(const char* what, int error);
  std::string path_;
  std::mutex mutex_;
  bool loaded_ = false;
  bool warned_ = false;
  bool unfinished_tail_ = false;  // the file ends without a newline
  std::map<std::string, std::string> engines_;
  std::set<std::string> unwritten_;  // keys whose line could not be appended
};

// The record's file: RINGTRAIN_CONV_CACHE when set ("off" or "": none), else
// $XDG_CACHE_HOME/ringtrain/conv-engines.tsv, else
// $HOME/.cache/ringtrain/conv-engines.tsv, else none. (Arguments: those
// variables' values, null when unset.)
std::string conv_engine_record_path(const char* conv_cache, const char* xdg_cache_home,
                                    const char* home);

// The process's record, at conv_engine_record_path of the environment.
EngineChoiceRecord& conv_engine_record();

// RINGTRAIN_CONV_TUNE: on (the default: time a shape's candidate engines) or
// off (the heuristics' first engine, as before timing existed); read once, a
// bad value refused naming the variable.
bool conv_engine_timing_wanted();

// The choice among candidates in preference order, given their times in ms
// (negative: not run) and the workspace each needs: among those within `tie`
// (a fraction) of the fastest, the one needing the least workspace, the
// earliest of equals; so engines of one speed are told apart by their needs
// and order, not by noise, and a workspace-hungry engine a few percent faster
// does not grow the step's shared workspace. Empty when none ran.
std::optional<std::size_t> choose_by_time(std::span<const float> ms,
                                          std::span<const std::size_t> workspace, float tie);

// Where nothing could be timed: the first of `count` candidates (preference
// order) that neither gave a wrong result nor failed to run (a non-empty
// wrong[i] or failed[i]; shorter spans: none) and that may run untried
// (sure(i)); empty where none is left, and the caller's own path runs the
// shape. A candidate that was not run for want of workspace stays eligible.
std::optional<std::size_t> first_usable_untimed(std::size_t count,
                                                std::span<const std::string> wrong,
                                                std::span<const std::string> failed,
                                                const std::function<bool(std::size_t)>& sure);

}  // namespace ringtrain::detail
