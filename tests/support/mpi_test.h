// What a multi-rank test sees: the topology built by mpi_catch_main.cpp.
#pragma once

#include "ringtrain/launch/topology.h"

namespace ringtrain::test {
const Topology& topology();
}  // namespace ringtrain::test
