// Gradient buckets: fixed slices of the flat gradient buffer, made once at model
// build time, in reverse layer order (the order backward produces gradients),
// each capped at --bucket-mb. A bucket is a slice, so all-reducing it copies
// nothing; its order is the same on every rank, so no negotiation is needed.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace ringtrain {

struct Bucket {
  std::size_t offset = 0;  // elements into the flat gradient buffer
  std::size_t count = 0;   // elements
  // Layers whose gradients the bucket holds. The bucket is complete when the
  // lowest of them is done, since backward runs from the last layer down.
  std::size_t first_layer = 0;
  std::size_t last_layer = 0;
};

class BucketPlan {
 public:
  // layer_ranges[i] = [offset, offset + count) of layer i's parameters, laid out
  // in layer order and contiguous. Layers without parameters have count 0.
  // cap_bytes = 0 puts everything in one bucket.
  BucketPlan(const std::vector<std::pair<std::size_t, std::size_t>>& layer_ranges,
             std::size_t element_bytes, std::size_t cap_bytes);

  const std::vector<Bucket>& buckets() const { return buckets_; }
  // The bucket that becomes complete when `layer`'s gradients are final, or -1.
  int bucket_completed_by(std::size_t layer) const;
  std::size_t total_count() const { return total_count_; }
  std::string describe() const;  // one line per bucket, for the start-up log

 private:
  std::vector<Bucket> buckets_;
  std::vector<int> completed_by_layer_;
  std::size_t total_count_ = 0;
};

}  // namespace ringtrain
