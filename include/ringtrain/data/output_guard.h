// What every converter checks before it reads anything: its output must not
// be one of its inputs (not even with --force: the input would be lost half
// way), and must not replace an existing file unless the user said --force.
// Together with DatasetWriter's temporary name and final rename, a conversion
// never loses an input or leaves a half-written output under the final name.
#pragma once

#include <string>
#include <vector>

namespace ringtrain {

// Throws Error naming `output_flag`, the path and the input it would replace.
// `inputs` are the paths read, each as "flag path" for the message, e.g.
// {{"--train", "a.csv"}}; empty paths (an optional input not given) are ignored.
struct GuardedInput {
  std::string flag;
  std::string path;
};
void guard_output(const std::string& output, const std::vector<GuardedInput>& inputs, bool force,
                  const std::string& output_flag = "--output");

// An output directory that a command fills with files of its own naming
// (data inspect --out and --dump): it may not exist yet, or be empty; a
// directory that holds files already (an earlier run's, which would mix with
// this run's) is refused unless `force`. Throws Error naming the flag.
void guard_output_directory(const std::string& dir, bool force, const std::string& flag);

// Writes `text` to `output` under a temporary name beside it, renamed into
// place at the end: an interrupted or failed write leaves neither a
// half-written file under the name asked for nor the temporary. Call
// guard_output() first, before the work that produces the text.
void write_output_text(const std::string& output, const std::string& text,
                       const std::string& output_flag = "--output");

}  // namespace ringtrain
