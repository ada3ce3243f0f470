// Which cuDNN engine each convolution shape runs, once chosen by time
// (ops/cuda/conv_engine_choice.h), remembered for the process and in a file.
//
// A choice by time could follow timing noise between runs: two runs of one
// job, a run and its resumption, or two ranks would then run different
// engines and stop repeating bit for bit. The record makes the first choice
// on a machine the choice of every later run there: a line "key<TAB>engine"
// appended to the file (one write(2) with O_APPEND, so ranks that append at
// once do not interleave), the last line of a key wins on reading (a choice
// made again, where a remembered engine is no longer offered, supersedes the
// old line). The key names the GPU, the cuDNN version and the shape, so
// another GPU model or cuDNN chooses again. A file that cannot be read or
// written costs the cross-run memory only, said once.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <span>
#include <string>

namespace ringtrain::detail {

class EngineChoiceRecord {
 public:
  // path "": the process's memory alone.
  explicit EngineChoiceRecord(std::string path);
  // The engine remembered for key (the file is read on the first call).
  std::optional<std::string> find(const std::string& key);
  // Remembers key's engine here and, where it is new for the key, appends it
  // to the file.
  void remember(const std::string& key, const std::string& engine);
  const std::string& path() const { return path_; }

 private:
  void load_once();
  std::string path_;
  std::mutex mutex_;
  bool loaded_ = false;
  bool write_warned_ = false;
  bool unfinished_tail_ = false;  // the file ends without a newline
  std::map<std::string, std::string> engines_;
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
// (negative: not run): the first whose time is within `tie` (a fraction) of
// the fastest, so that engines of one speed are told apart by their order,
// not by noise. Empty when none ran.
std::optional<std::size_t> choose_by_time(std::span<const float> ms, float tie);

}  // namespace ringtrain::detail
