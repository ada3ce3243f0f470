#include "comm/deadline.h"

#include <sys/prctl.h>

namespace ringtrain::comm_detail {

void tighten_timer_slack() {
  // Per thread, and unprivileged; a failure only leaves the default slack.
  static thread_local const int rc = prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL);
  (void)rc;
}

}  // namespace ringtrain::comm_detail
