// The communication thread of a CPU backend: runs queued collectives one after
// another, in issue order, while the trainer goes on (backward keeps producing
// gradient buckets). A blocking call with nothing queued runs on the caller's
// thread instead, which saves the hand-off latency on small messages.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "ringtrain/comm/communicator.h"

namespace ringtrain::comm_detail {

class CommThread {
 public:
  // wait_timeout_seconds bounds CommRequest::wait (a backstop; the work's own
  // waits time out first and name the missing ranks).
  explicit CommThread(double wait_timeout_seconds);
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  CommRequest submit(std::string what, std::function<void()> work);
  // Runs `work` now on this thread if nothing is queued or running, else
  // queues it and waits.
  void run_blocking(std::string what, std::function<void()> work);
  // Waits for everything queued; afterwards the thread is stopped.
  void stop();

 private:
  struct Task;
  void loop();
  static void execute(Task& task);

  double wait_timeout_seconds_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Task>> queue_;
  bool busy_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ringtrain::comm_detail
