// Start-up agreement and replica consistency (DESIGN.md). Every rank
// all-gathers a signature of what it is about to run; any difference is an
// Error naming the ranks and the fields that differ. During training, a hash of
// the parameters is compared the same way, so divergence is an error rather
// than a silent drift.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ringtrain/comm/communicator.h"

namespace ringtrain {

// A named 64-bit field of the signature, e.g. {"model spec hash", ...}, {"--batch", 64}.
// `value` is what ranks compare; `text` is how a mismatch prints it ("" prints
// the value in decimal), so a flag reads as the user wrote it, not as bits.
struct SignatureField {
  SignatureField(std::string name_, std::uint64_t value_, std::string text_ = {})
      : name(std::move(name_)), value(value_), text(std::move(text_)) {}
  std::string name;
  std::uint64_t value = 0;
  std::string text;
};

// Fields whose text is the value in its own form.
SignatureField signature_number(std::string name, std::uint64_t value);
SignatureField signature_real(std::string name, double value);              // compared bit for bit
SignatureField signature_text(std::string name, const std::string& value);  // compared by hash
SignatureField signature_bool(std::string name, bool value);

// Collective. Throws Error such as: "ranks disagree on the run: '--batch' is 64
// on ranks 0,2, but 32 on rank 1". The field names and count must be the same on
// every rank (they come from the same code). On a mismatch the ranks exchange
// the texts of the differing fields (every rank sees the same mismatch, so all
// take part), and every rank throws the same message.
void agree_on_signature(Communicator& comm, const std::vector<SignatureField>& fields);

// 64-bit FNV-1a over the bytes of a host buffer: equal replicas hash equal bit
// for bit, since every rank applies the same averaged gradients.
std::uint64_t hash_bytes(const void* data, std::size_t bytes,
                         std::uint64_t seed = 0xcbf29ce484222325ull);

// Collective. Compares `hash` across ranks; throws Error naming the ranks that
// differ from rank 0 and the step.
void check_replicas(Communicator& comm, std::uint64_t hash, std::uint64_t step);

}  // namespace ringtrain
