#include "ringtrain/sync/zero_layout.h"

#include <algorithm>

#include "ringtrain/core/check.h"

namespace ringtrain {

ZeroLayout::ZeroLayout(const BucketPlan& plan, int world, int rank)
    : world_(world), rank_(rank), param_count_(plan.total_count()) {
  RT_CHECK(world >= 1 && rank >= 0 && rank < world, "ZeRO layout: rank {} of {} ranks", rank,
           world);
  const auto w = static_cast<std::size_t>(world);
  const auto r = static_cast<std::size_t>(rank);
  for (const Bucket& b : plan.buckets()) {
    ZeroBlock z;
    z.bucket_offset = b.offset;
    z.bucket_count = b.count;
    z.block = (b.count + w - 1) / w;
    z.shard_offset = shard_count_;
    z.staging_offset = shard_count_ * w;
    const std::size_t begin = std::min(b.count, r * z.block);
    z.own_offset = b.offset + begin;
    z.own_count = std::min(b.count, begin + z.block) - begin;
    shard_count_ += z.block;
    blocks_.push_back(z);
  }
}

}  // namespace ringtrain
