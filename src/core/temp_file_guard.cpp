#include "ringtrain/core/temp_file_guard.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <mutex>

namespace ringtrain {

namespace {

// What the handler reads: fixed buffers and lock-free flags, no allocation
// (unlink(2) and raise(3) are async-signal-safe; std::string is not).
constexpr int kSlots = 8;
constexpr std::size_t kPathMax = 4096;
char g_paths[kSlots][kPathMax];
std::atomic<bool> g_used[kSlots];
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP};
struct sigaction g_previous[std::size(kSignals)];
bool g_installed[std::size(kSignals)] = {};
int g_guards = 0;  // guarded paths; the handlers stay while any is
std::mutex g_mutex;

extern "C" void remove_temporaries(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_used[i].load()) ::unlink(g_paths[i]);
  // Then die of the signal as the default action would.
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

}  // namespace

TempFileGuard::TempFileGuard(const std::string& path) {
  if (path.size() >= kPathMax) return;
  std::lock_guard lock(g_mutex);
  for (int i = 0; i < kSlots; ++i) {
    if (g_used[i].load()) continue;
    std::memcpy(g_paths[i], path.c_str(), path.size() + 1);
    g_used[i].store(true);
    slot_ = i;
    break;
  }
  if (slot_ < 0 || g_guards++ > 0) return;
  for (std::size_t s = 0; s < std::size(kSignals); ++s) {
    struct sigaction current {};
    ::sigaction(kSignals[s], nullptr, &current);
    if (current.sa_handler != SIG_DFL) continue;  // someone else's handler stays
    struct sigaction action {};
    action.sa_handler = remove_temporaries;
    sigemptyset(&action.sa_mask);
    g_installed[s] = ::sigaction(kSignals[s], &action, &g_previous[s]) == 0;
  }
}

TempFileGuard::~TempFileGuard() {
  if (slot_ < 0) return;
  std::lock_guard lock(g_mutex);
  g_used[slot_].store(false);
  if (--g_guards > 0) return;
  for (std::size_t s = 0; s < std::size(kSignals); ++s)
    if (g_installed[s]) {
      ::sigaction(kSignals[s], &g_previous[s], nullptr);
      g_installed[s] = false;
    }
}

}  // namespace ringtrain
