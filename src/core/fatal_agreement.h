// When several ranks fail with the same message (bad data that every rank
// finds, a file missing on every node, the same bad flag), the user should
// read it once, not once per rank. Before printing, fatal() offers its
// message's fingerprint to every other rank, point to point on a communicator
// of its own, and listens for theirs for a short while (until every rank has
// offered one, at most `seconds`). The failing ranks that share a message
// then know each other: the lowest prints it, naming the others, and tells
// them so; they print nothing, unless that word does not come (then each says
// its own line, as a rank that fails alone does). fatal() asks for this for
// bad input (exit 2) only. A rank that fails only because another did, and
// says that rank's error on its behalf ("rank 1 could not open its data set:
// ..."), is a relay: it offers the fingerprint of the origin's message, and
// the origin speaks in its place (a relay speaks only when no origin is heard).
// Internal: the public headers never see mpi.h.
#pragma once

#include <string>
#include <vector>

namespace ringtrain {

// Called by MpiSession right after MPI_Init (collective over MPI_COMM_WORLD)
// and before MPI_Finalize.
void open_fatal_agreement();
void close_fatal_agreement();

struct FatalAgreement {
  bool speaks = true;           // this rank prints the message
  int speaker = 0;              // the rank that prints it
  std::vector<int> same_ranks;  // the failing ranks with this message, relays excluded (this one
                                // included unless it is a relay)
  std::vector<int> group;       // every rank with this message, relays included
  int world = 1;
};

// Offers (message, exit code) and listens for the other ranks' offers. Never
// throws; returns after at most `seconds`. With `origin`, this rank relays
// another rank's error whose message is *origin.
FatalAgreement agree_on_fatal(const std::string& message, int exit_code, double seconds,
                              const std::string* origin = nullptr);

// The speaker, after printing: tells the others of its group that the line is
// out. The others wait for that word (at most `seconds`) and return whether it
// came; if not, they print their own line.
void tell_fatal_printed(const FatalAgreement& a);
bool wait_fatal_printed(const FatalAgreement& a, double seconds);

// "rank 2", "ranks 0-3 (all)", "ranks 0,2"
std::string describe_ranks(const std::vector<int>& ranks, int world);

}  // namespace ringtrain
