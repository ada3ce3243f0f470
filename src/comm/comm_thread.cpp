#include "comm/comm_thread.h"

#include <chrono>

#include "comm/deadline.h"
#include "ringtrain/core/fatal.h"
#include "ringtrain/core/timer.h"

namespace ringtrain::comm_detail {

struct CommThread::Task : CommRequest::State {
  std::string what;
  std::function<void()> work;
  double wait_timeout_seconds = 0;
  mutable std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  std::exception_ptr error;
  CommRequest::RunTimes ran;  // set with done

  bool test() override {
    std::lock_guard lock(mutex);
    if (done && error) std::rethrow_exception(error);
    return done;
  }
  void wait() override {
    std::unique_lock lock(mutex);
    // Slack over the work's own timeout, which fires first with a better message.
    const auto limit = std::chrono::duration<double>(wait_timeout_seconds * 1.5 + 5.0);
    if (!done_cv.wait_for(lock, limit, [this] { return done; }))
      fatal(what + " did not complete within " + std::to_string(limit.count()) +
            " s: the communication thread is stuck");
    if (error) std::rethrow_exception(error);
  }
  CommRequest::RunTimes run_times() const override {
    std::lock_guard lock(mutex);
    return done ? ran : CommRequest::RunTimes{};
  }
};

CommThread::CommThread(double wait_timeout_seconds)
    : wait_timeout_seconds_(wait_timeout_seconds), thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  stop();
}

void CommThread::stop() {
  {
    std::lock_guard lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CommThread::execute(Task& task) {
  std::exception_ptr error;
  const double began = monotonic_seconds();
  try {
    task.work();
  } catch (const CommTimeout& e) {
    // The failure policy: a timed-out collective ends the job, naming the ranks.
    fatal(e.what());
  } catch (...) {
    error = std::current_exception();
  }
  {
    std::lock_guard lock(task.mutex);
    task.done = true;
    task.error = error;
    task.ran = {began, monotonic_seconds()};
    task.work = nullptr;
  }
  task.done_cv.notify_all();
}

CommRequest CommThread::submit(std::string what, std::function<void()> work) {
  auto task = std::make_shared<Task>();
  task->what = std::move(what);
  task->work = std::move(work);
  task->wait_timeout_seconds = wait_timeout_seconds_;
  {
    std::lock_guard lock(mutex_);
    if (stopping_) throw Error("collective '" + task->what + "' issued on a closed communicator");
    queue_.push_back(task);
  }
  wake_.notify_one();
  return CommRequest(task);
}

void CommThread::run_blocking(std::string what, std::function<void()> work) {
  {
    std::unique_lock lock(mutex_);
    if (!busy_ && queue_.empty() && !stopping_) {
      busy_ = true;  // the thread will not start anything while we run
      lock.unlock();
      struct Release {
        CommThread* t;
        ~Release() {
          bool wake = false;
          {
            std::lock_guard l(t->mutex_);
            t->busy_ = false;
            wake = !t->queue_.empty() || t->stopping_;
          }
          // Waking the idle thread for nothing would cost a context switch on
          // this rank's core after every blocking collective.
          if (wake) t->wake_.notify_all();
        }
      } release{this};
      try {
        work();
      } catch (const CommTimeout& e) {
        fatal(e.what());
      }
      return;
    }
  }
  submit(std::move(what), std::move(work)).wait();
}

void CommThread::loop() {
  for (;;) {
    std::shared_ptr<Task> task;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock,
                 [this] { return (!queue_.empty() && !busy_) || (stopping_ && queue_.empty()); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    execute(*task);
    {
      std::lock_guard lock(mutex_);
      busy_ = false;
    }
    wake_.notify_all();
  }
}

}  // namespace ringtrain::comm_detail
