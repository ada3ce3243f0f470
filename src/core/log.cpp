#include "ringtrain/core/log.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace ringtrain {

namespace {
LogIdentity g_identity;
std::mutex g_write_mutex;

const char* level_tag(LogLevel level) {
  switch (level) {
    case LogLevel::info:
      return "";
    case LogLevel::warn:
      return "warning: ";
    case LogLevel::error:
      return "error: ";
  }
  return "";
}
}  // namespace

void set_log_identity(const LogIdentity& identity) {
  g_identity = identity;
}

void set_log_identity_from_launcher() {
  LogIdentity id;
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (const char* v = std::getenv(var)) {
      id.rank = std::atoi(v);
      break;
    }
  }
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"}) {
    if (const char* v = std::getenv(var)) {
      id.world = std::atoi(v);
      break;
    }
  }
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) == 0 && host[0] != '\0') id.host = host;
  g_identity = id;
}
const LogIdentity& log_identity() {
  return g_identity;
}

std::string rank_prefix() {
  return fmt::format("[rank {}/{}]", g_identity.rank, g_identity.host);
}

void log_line(LogLevel level, const std::string& message) {
  // Warnings and errors go to stderr, the rest to stdout; one write per line so
  // that lines from threads do not interleave.
  std::string line = fmt::format("{} {}{}\n", rank_prefix(), level_tag(level), message);
  std::lock_guard lock(g_write_mutex);
  FILE* out = level >= LogLevel::warn ? stderr : stdout;
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

void log0_line(LogLevel level, const std::string& message) {
  if (g_identity.rank != 0) return;
  std::string line = message + "\n";
  std::lock_guard lock(g_write_mutex);
  FILE* out = level >= LogLevel::warn ? stderr : stdout;
  if (level >= LogLevel::warn) line = std::string(level_tag(level)) + line;
  std::fwrite(line.data(), 1, line.size(), out);
  std::fflush(out);
}

}  // namespace ringtrain
