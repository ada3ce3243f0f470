#include "ops/cuda/engine_timing.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>
#include <map>
#include <mutex>

#include <fmt/format.h>

#include "core/cuda/check_cuda.h"
#include "ringtrain/core/log.h"

namespace ringtrain::detail {

namespace {
// The events are destroyed however the timing ends.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    RT_CUDA_CHECK(cudaEventCreate(&start));
    RT_CUDA_CHECK(cudaEventCreate(&stop));
  }
  ~EventPair() {
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
};
}  // namespace

float time_launches(void* stream, const std::function<void()>& launch, int repeats) {
  const auto s = static_cast<cudaStream_t>(stream);
  EventPair events;
  launch();
  RT_CUDA_CHECK(cudaStreamSynchronize(s));
  float least = std::numeric_limits<float>::max();
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    RT_CUDA_CHECK(cudaEventRecord(events.start, s));
    launch();
    RT_CUDA_CHECK(cudaEventRecord(events.stop, s));
    RT_CUDA_CHECK(cudaEventSynchronize(events.stop));
    float ms = 0;
    RT_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
    least = std::min(least, ms);
  }
  return least;
}

std::vector<float> time_candidates(void* stream, std::span<const std::size_t> need,
                                   std::size_t room, const std::function<void(std::size_t)>& launch,
                                   const ResultCheck* check, std::vector<std::string>* wrong,
                                   std::vector<std::string>* failed) {
  std::vector<float> ms(need.size(), -1.0f);
  if (wrong != nullptr) wrong->assign(need.size(), std::string());
  if (failed != nullptr) failed->assign(need.size(), std::string());
  for (std::size_t i = 0; i < need.size(); ++i) {
    if (need[i] > room) continue;
    try {
      if (check != nullptr) check->before(i);
      const float t = time_launches(stream, [&] { launch(i); });
      // The result of its last run: a fast wrong answer is no candidate.
      std::string why = check != nullptr ? check->verdict(i) : std::string();
      if (why.empty())
        ms[i] = t;
      else if (wrong != nullptr)
        (*wrong)[i] = std::move(why);
    } catch (const std::exception& e) {
      (void)cudaGetLastError();
      if (failed != nullptr) (*failed)[i] = e.what();
    }
  }
  return ms;
}

std::string timed_choice_note(std::span<const float> ms, std::size_t chosen, double seconds) {
  const auto ran = std::count_if(ms.begin(), ms.end(), [](float t) { return t >= 0; });
  return fmt::format(
      "timed {} of {}: {:.3f} ms, the heuristics' first {}; {:.2f} s", ran, ms.size(), ms[chosen],
      ms.empty() || ms[0] < 0 ? std::string("not run") : fmt::format("{:.3f} ms", ms[0]), seconds);
}

void note_candidate_times(const std::string& key, std::span<const std::string> names,
                          std::span<const float> ms, std::span<const std::size_t> need,
                          std::size_t chosen, std::span<const std::string> wrong,
                          std::span<const std::string> failed) {
  const char* path = std::getenv("RINGTRAIN_CONV_TIMES");
  if (path == nullptr || *path == '\0') return;
  std::string line = key + "\t" + (chosen < names.size() ? names[chosen] : "none") + "\t";
  for (std::size_t i = 0; i < names.size() && i < ms.size() && i < need.size(); ++i) {
    line += fmt::format("{}{} {:.4f} ms {} B", i == 0 ? "" : "; ", names[i], ms[i], need[i]);
    if (i < wrong.size() && !wrong[i].empty()) line += " wrong: " + wrong[i];
    // One line per choice, candidates apart by "; ": the error's own line
    // breaks, tabs and semicolons flattened.
    if (i < failed.size() && !failed[i].empty()) {
      std::string error = failed[i];
      std::replace_if(
          error.begin(), error.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; },
          ' ');
      std::replace(error.begin(), error.end(), ';', ',');
      line += " failed: " + error;
    }
  }
  line += "\n";
  // One write of the whole line in append mode: ranks appending at once do
  // not interleave within a line.
  const int fd = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  const ssize_t wrote = fd >= 0 ? ::write(fd, line.data(), line.size()) : -1;
  const std::string why = fd < 0 || wrote < 0 ? std::strerror(errno) : "a short write";
  if (fd >= 0) ::close(fd);
  static std::atomic<bool> warned{false};
  if (wrote != static_cast<ssize_t>(line.size()) && !warned.exchange(true))
    log_warn("RINGTRAIN_CONV_TIMES={}: cannot append the engines' timings ({})", path, why);
}

bool stream_is_capturing(void* stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  RT_CUDA_CHECK(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status));
  return status != cudaStreamCaptureStatusNone;
}

std::string engine_record_device() {
  int device = 0;
  RT_CUDA_CHECK(cudaGetDevice(&device));
  // Asked once per device: a model's build asks for every convolution, and
  // cudaGetDeviceProperties can take milliseconds.
  static std::mutex mutex;
  static std::map<int, std::string> known;
  const std::lock_guard lock(mutex);
  if (const auto it = known.find(device); it != known.end()) return it->second;
  cudaDeviceProp prop{};
  RT_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  // The SM count tells a MIG slice (or a smaller part of one name) apart.
  // cuBLASLt's version too: the GEMM weight gradients' algorithms are its.
  return known[device] =
             fmt::format("{} sm{}{} x{}|cuDNN {} cuBLASLt {}", prop.name, prop.major, prop.minor,
                         prop.multiProcessorCount, cudnnGetVersion(), cublasLtGetVersion());
}

}  // namespace ringtrain::detail
