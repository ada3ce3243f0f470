#include "comm/broadcast_text.h"

#include <cstdint>
#include <cstring>
#include <vector>

namespace ringtrain {

namespace {
BufferView host_words(std::vector<std::uint64_t>& v) {
  return {v.data(), v.size(), DType::i64, Device::cpu()};
}
}  // namespace

std::string broadcast_text(Communicator& comm, const std::string& text, int root) {
  // Whole 8-byte words: every backend moves i64 buffers.
  std::vector<std::uint64_t> len{text.size()};
  comm.broadcast(host_words(len), host_words(len), root);
  std::vector<std::uint64_t> words((len[0] + 7) / 8, 0);
  if (comm.rank() == root) std::memcpy(words.data(), text.data(), text.size());
  if (!words.empty()) comm.broadcast(host_words(words), host_words(words), root);
  return {reinterpret_cast<const char*>(words.data()), static_cast<std::size_t>(len[0])};
}

}  // namespace ringtrain
