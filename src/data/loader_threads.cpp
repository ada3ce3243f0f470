#include "data/loader_threads.h"

namespace ringtrain {

LoaderThreads::LoaderThreads(std::size_t threads) {
  for (std::size_t t = 1; t < threads; ++t) workers_.emplace_back([this] { work(); });
}

LoaderThreads::~LoaderThreads() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  start_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

// Takes indices of the current job until none is left.
void LoaderThreads::drain() {
  std::unique_lock lock(mutex_);
  while (job_ && next_ < count_) {
    const std::size_t i = next_++;
    const auto* job = job_;
    lock.unlock();
    try {
      (*job)(i);
    } catch (...) {
      lock.lock();
      if (!error_) error_ = std::current_exception();
      lock.unlock();
    }
    lock.lock();
    if (++finished_ == count_) done_cv_.notify_all();
  }
}

void LoaderThreads::work() {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    drain();
  }
}

void LoaderThreads::run(std::size_t count, const std::function<void(std::size_t)>& f) {
  if (count == 0) return;
  if (workers_.empty()) {
    for (std::size_t i = 0; i < count; ++i) f(i);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    job_ = &f;
    count_ = count;
    next_ = finished_ = 0;
    error_ = nullptr;
    ++generation_;
  }
  start_cv_.notify_all();
  drain();
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return finished_ == count_; });
  job_ = nullptr;
  if (error_) std::rethrow_exception(error_);
}

}  // namespace ringtrain
