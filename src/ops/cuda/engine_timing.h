// Timing a cuDNN engine on the GPU, for the convolutions' choice among their
// candidate engines (gpu_conv_plan.cpp; the record of choices is
// ops/conv_engine_record.h).
#pragma once

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace ringtrain::detail {

// The least time of `repeats` runs of `launch` on `stream`, in ms, after one
// untimed run (a first launch loads kernels). Blocks the host; never under a
// stream capture (stream_is_capturing).
float time_launches(void* stream, const std::function<void()>& launch, int repeats = 3);

bool stream_is_capturing(void* stream);

// Each of need.size() candidates timed with time_launches(launch(i)) where
// its workspace need fits `room`; -1 where it does not fit or fails to run
// (the CUDA error it left is cleared: a candidate that fails is passed over).
// Where `check` is given, its before(i) runs ahead of candidate i's runs
// (to poison the output: a candidate that writes nothing must not pass on
// the previous one's result), and its verdict(i) after them says what is
// wrong with the result ("" nothing); a candidate with an answer is passed
// over too, and the answer kept in (*wrong)[i]. Where `failed` is given, a
// candidate that threw has its error in (*failed)[i] (one that did not fit
// has none: it may run where the workspace is larger).
struct ResultCheck {
  std::function<void(std::size_t)> before;
  std::function<std::string(std::size_t)> verdict;
};
std::vector<float> time_candidates(void* stream, std::span<const std::size_t> need,
                                   std::size_t room, const std::function<void(std::size_t)>& launch,
                                   const ResultCheck* check = nullptr,
                                   std::vector<std::string>* wrong = nullptr,
                                   std::vector<std::string>* failed = nullptr);

// bench step --layers' note on a timed choice: "timed 3 of 3: 0.412 ms, the
// heuristics' first 4.013 ms; 0.84 s" (ms[0] is the heuristics' first).
std::string timed_choice_note(std::span<const float> ms, std::size_t chosen, double seconds);

// Where RINGTRAIN_CONV_TIMES names a file: one line appended per timed
// choice, "<key>\t<chosen>\t<name> <ms> ms <workspace> B; ..." (-1: not run;
// chosen "none": none could be timed, chosen >= names.size(); a candidate
// whose result was wrong has " wrong: <why>" after its figures, one that
// failed to run " failed: <error>"), the figures behind a choice that bench
// step --layers shows only two of. A file that cannot be written is said
// once. Nothing without the variable.
void note_candidate_times(const std::string& key, std::span<const std::string> names,
                          std::span<const float> ms, std::span<const std::size_t> need,
                          std::size_t chosen, std::span<const std::string> wrong = {},
                          std::span<const std::string> failed = {});

// "<GPU name> sm<major><minor> x<SMs>|cuDNN <version> cuBLASLt <version>": what a remembered
// choice holds for.
std::string engine_record_device();

}  // namespace ringtrain::detail
