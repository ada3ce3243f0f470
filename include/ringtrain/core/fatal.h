// The failure policy: a fatal error on any rank ends the whole job. fatal()
// prints the message with the [rank r/host] prefix, runs the abort hooks (NCCL
// registers ncclCommAbort there), then calls MPI_Abort so that no peer is left
// waiting in a collective.
#pragma once

#include <functional>
#include <string>

namespace ringtrain {

inline constexpr int kFatalExitCode = 3;

[[noreturn]] void fatal(const std::string& message, int exit_code = kFatalExitCode);
// fatal() with `label` in place of "fatal" in the line it prints ("error" for
// a bad flag). Where every rank fails with the same message, the lowest rank
// prints it once, naming the ranks that share it.
[[noreturn]] void fatal_as(const char* label, const std::string& message, int exit_code);

// Hooks run in reverse registration order, once, before MPI_Abort. The returned
// id removes the hook again (a communicator that is destroyed normally).
using AbortHookId = int;
AbortHookId register_abort_hook(std::function<void()> hook);
void unregister_abort_hook(AbortHookId id);

// A SIGTERM reached this rank: mpirun sends one to every rank when another
// rank aborts the job, and a failure that follows here (a lost peer) is that
// teardown, already said by the rank that ended the job. fatal() then ends the
// process without a second message. Async-signal-safe (a lock-free atomic),
// for the stop-signal handler.
void note_termination_signal() noexcept;

// A rank that stops only because another rank failed, and throws that rank's
// error on its behalf (`relay`, e.g. "rank 1 could not open its data set:
// ..."), notes it before throwing. A fatal() of exactly `relay` (bad input,
// exit 2) then lets the failing rank say its own line (`origin`, its message)
// and prints the relay only when that line does not come: one message, from
// the rank that failed, naming it.
void note_relayed_error(const std::string& relay, const std::string& origin);

// The message fatal() is ending the job with, for the abort hooks (the flight
// recorder stores it); empty before fatal() is called.
std::string fatal_message();

}  // namespace ringtrain
