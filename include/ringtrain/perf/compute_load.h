// A background thread that computes until it is destroyed (single-precision
// GEMMs of 128 x 128 on the CPU, the matrix work of a training step) and
// counts the GEMMs it finished. 'bench model --under-load' times all-reduces
// beside it, as overlap runs them beside backward, and reads from the count how
// much compute an all-reduce costs on a shared core.
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

namespace ringtrain {

class ComputeLoad {
 public:
  ComputeLoad();
  ~ComputeLoad();
  ComputeLoad(const ComputeLoad&) = delete;
  ComputeLoad& operator=(const ComputeLoad&) = delete;

  // GEMMs finished so far.
  std::uint64_t done() const { return done_.load(std::memory_order_relaxed); }
  // GEMMs per second over `seconds` while the calling thread sleeps (the
  // rate alone, to compare the rate beside an all-reduce with).
  double rate_alone(double seconds) const;

 private:
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> done_{0};
  std::thread thread_;
};

// A fixed amount of compute on the calling thread (the same GEMMs), so that
// every rank does the same work however fast its core runs it: 'bench model
// --after-compute' puts one before each all-reduce, as backward does before
// the exposed all-reduce of a step.
class ComputeBurst {
 public:
  // gemms: the work of one burst (see gemms_per_second to size it).
  explicit ComputeBurst(std::uint64_t gemms);
  ComputeBurst(const ComputeBurst&) = delete;
  ComputeBurst& operator=(const ComputeBurst&) = delete;
  void run();
  // This thread's GEMM rate over about `seconds`.
  static double gemms_per_second(double seconds);

 private:
  std::uint64_t gemms_;
};

}  // namespace ringtrain
