#include "ringtrain/sync/bucket_plan.h"

#include <fmt/format.h>

#include "ringtrain/core/check.h"

namespace ringtrain {

BucketPlan::BucketPlan(const std::vector<std::pair<std::size_t, std::size_t>>& layer_ranges,
                       std::size_t element_bytes, std::size_t cap_bytes) {
  RT_CHECK(element_bytes > 0, "bucket plan: element size must be positive");
  completed_by_layer_.assign(layer_ranges.size(), -1);
  std::size_t expected_offset = 0;
  for (std::size_t i = 0; i < layer_ranges.size(); ++i) {
    if (layer_ranges[i].second == 0) continue;
    RT_CHECK(layer_ranges[i].first == expected_offset,
             "bucket plan: layer {} parameters start at {} but the previous layer ends at {}: "
             "parameters must be contiguous in layer order",
             i, layer_ranges[i].first, expected_offset);
    expected_offset += layer_ranges[i].second;
  }
  total_count_ = expected_offset;
  const std::size_t cap_elems =
      cap_bytes == 0 ? total_count_ : std::max<std::size_t>(1, cap_bytes / element_bytes);

  // Walk layers from last to first. A bucket grows downwards through whole
  // layers until adding the next would pass the cap; a bucket always holds at
  // least one layer, so a layer larger than the cap is a bucket of its own.
  Bucket current;
  bool open = false;
  auto close = [&] {
    if (!open) return;
    buckets_.push_back(current);
    completed_by_layer_[current.first_layer] = static_cast<int>(buckets_.size() - 1);
    open = false;
  };
  for (std::size_t k = layer_ranges.size(); k-- > 0;) {
    const auto [offset, count] = layer_ranges[k];
    if (count == 0) continue;
    if (open && current.count + count > cap_elems) close();
    if (!open) {
      current = {offset + count, 0, k, k};
      open = true;
    }
    current.offset = offset;
    current.count += count;
    current.first_layer = k;
  }
  close();
}

int BucketPlan::bucket_completed_by(std::size_t layer) const {
  return layer < completed_by_layer_.size() ? completed_by_layer_[layer] : -1;
}

std::string BucketPlan::describe() const {
  std::string out;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    const Bucket& k = buckets_[b];
    out += fmt::format("  bucket {}: layers {}..{}, {} elements at offset {}\n", b, k.first_layer,
                       k.last_layer, k.count, k.offset);
  }
  return out;
}

}  // namespace ringtrain
