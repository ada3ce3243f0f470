#include "core/fault_stall.h"

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

namespace ringtrain {

namespace {

struct StallFault {
  int rank = -1;
  std::string point;
  bool any_step = true;
  std::uint64_t step = 0;
  double seconds = 3600;
};

StallFault read_env() {
  StallFault f;
  const char* rank = std::getenv("RINGTRAIN_FAULT_STALL_RANK");
  const char* point = std::getenv("RINGTRAIN_FAULT_STALL_PHASE");
  if (!rank || !point) return f;
  f.rank = std::atoi(rank);
  f.point = point;
  if (const char* step = std::getenv("RINGTRAIN_FAULT_STALL_STEP")) {
    f.any_step = false;
    f.step = std::strtoull(step, nullptr, 10);
  }
  if (const char* seconds = std::getenv("RINGTRAIN_FAULT_STALL_SECONDS"))
    f.seconds = std::atof(seconds);
  return f;
}

}  // namespace

void fault_stall_point(std::string_view point, int rank, std::uint64_t step) {
  static const StallFault fault = read_env();
  if (fault.rank != rank || fault.point != point || (!fault.any_step && fault.step != step)) return;
  std::this_thread::sleep_for(std::chrono::duration<double>(fault.seconds));
}

}  // namespace ringtrain
