// A string from one rank to all: error messages that every rank must report
// the same way (a failing rank's own words, not a peer's guess at them).
#pragma once

#include <string>

#include "ringtrain/comm/communicator.h"

namespace ringtrain {

// Collective over `comm`: every rank returns root's `text` (others pass any).
std::string broadcast_text(Communicator& comm, const std::string& text, int root);

}  // namespace ringtrain
