#include "data/device_widening.h"

#include <algorithm>

namespace ringtrain {

std::optional<kernels::ChannelWidening> device_widening(const Dataset& data) {
  if (!data.reads_bytes()) return std::nullopt;
  const Dataset::ByteWidening b = data.byte_widening();
  if (b.scale.empty() || b.scale.size() > static_cast<std::size_t>(kernels::kMaxWidenChannels))
    return std::nullopt;
  kernels::ChannelWidening w;
  w.channels = static_cast<int>(b.scale.size());
  w.plane = std::max<std::size_t>(b.plane, 1);
  std::copy(b.scale.begin(), b.scale.end(), w.scale);
  std::copy(b.offset.begin(), b.offset.end(), w.offset);
  return w;
}

}  // namespace ringtrain
