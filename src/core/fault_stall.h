// A test hook that stalls one rank at a named point, so the timeouts and the
// flight recorder's verdict can be tested:
//   RINGTRAIN_FAULT_STALL_RANK=r RINGTRAIN_FAULT_STALL_PHASE=p
//   [RINGTRAIN_FAULT_STALL_STEP=s (any step when unset)]
//   [RINGTRAIN_FAULT_STALL_SECONDS=t (default 3600)]
// makes rank r sleep t seconds when it reaches point p (of step s). Points:
// "open" (the data set), "data", "forward", "backward", "optimizer".
#pragma once

#include <cstdint>
#include <string_view>

namespace ringtrain {

void fault_stall_point(std::string_view point, int rank, std::uint64_t step = 0);

}  // namespace ringtrain
