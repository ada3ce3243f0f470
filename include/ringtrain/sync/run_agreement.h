// Start-up agreement and replica consistency (DESIGN.md). Every rank
// all-gathers a signature of what it is about to run; any difference is an
// Error naming the ranks and the fields that differ. During training, a hash of
// the parameters is compared the same way, so divergence is an error rather
// than a silent drift.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ringtrain/comm/communicator.h"

namespace ringtrain {

// A named 64-bit field of the signature, e.g. {"model hash", ...}, {"batch", 64}.
struct SignatureField {
  std::string name;
  std::uint64_t value = 0;
};

// Collective. Throws Error such as: "ranks disagree on the run: field 'batch' is 64
// on ranks 0,2 but 32 on rank 1". The field names and count must be the same on
// every rank (they come from the same code).
void agree_on_signature(Communicator& comm, const std::vector<SignatureField>& fields);

// 64-bit FNV-1a over the bytes of a host buffer: equal replicas hash equal bit
// for bit, since every rank applies the same averaged gradients.
std::uint64_t hash_bytes(const void* data, std::size_t bytes,
                         std::uint64_t seed = 0xcbf29ce484222325ull);

// Collective. Compares `hash` across ranks; throws Error naming the ranks that
// differ from rank 0 and the step.
void check_replicas(Communicator& comm, std::uint64_t hash, std::uint64_t step);

}  // namespace ringtrain
