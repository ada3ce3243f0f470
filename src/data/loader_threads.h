// The decode/augment threads of one rank's loader (--loader-threads N): the
// loader thread hands each batch's samples out to them and waits, so a batch
// is ready N times sooner while the bounded prefetch queue stays as it is.
// Which thread transforms a sample never changes the result: every random
// choice is a function of (seed, epoch, index).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ringtrain {

class LoaderThreads {
 public:
  // `threads` >= 1 in all, the calling thread included.
  explicit LoaderThreads(std::size_t threads);
  ~LoaderThreads();
  LoaderThreads(const LoaderThreads&) = delete;
  LoaderThreads& operator=(const LoaderThreads&) = delete;

  std::size_t size() const { return workers_.size() + 1; }
  // Runs f(i) for i in [0, count) on all threads, the caller's included, and
  // returns when every call has; rethrows the first exception.
  void run(std::size_t count, const std::function<void(std::size_t)>& f);

 private:
  void work();
  void drain();

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable start_cv_, done_cv_;
  const std::function<void(std::size_t)>* job_ = nullptr;
  std::size_t count_ = 0, next_ = 0, finished_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
  std::exception_ptr error_;
};

}  // namespace ringtrain
