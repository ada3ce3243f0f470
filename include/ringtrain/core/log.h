// Logging with a rank prefix: "[rank r/host] message". log0 prints on rank 0
// only, for the lines a user reads once per job (start-up table, summaries).
#pragma once

#include <string>
#include <utility>

#include <fmt/format.h>

namespace ringtrain {

enum class LogLevel { info, warn, error };

struct LogIdentity {
  int rank = 0;
  int world = 1;
  std::string host = "?";
};

// Set once by the topology after MPI_Init; before that the prefix is "rank 0/?",
// or what set_log_identity_from_launcher found.
void set_log_identity(const LogIdentity& identity);
// Before MPI starts: the rank from the launcher's environment (Open MPI, PMIx,
// PMI, Slurm) and this host's name, so that messages printed before MPI_Init
// (a bad flag, a signal during start-up) name the real rank and host.
void set_log_identity_from_launcher();
const LogIdentity& log_identity();

// "[rank r/host]"
std::string rank_prefix();

void log_line(LogLevel level, const std::string& message);
void log0_line(LogLevel level, const std::string& message);

template <typename... Args>
void log_info(fmt::format_string<Args...> f, Args&&... args) {
  log_line(LogLevel::info, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_warn(fmt::format_string<Args...> f, Args&&... args) {
  log_line(LogLevel::warn, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log_error(fmt::format_string<Args...> f, Args&&... args) {
  log_line(LogLevel::error, fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void log0(fmt::format_string<Args...> f, Args&&... args) {
  log0_line(LogLevel::info, fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ringtrain
