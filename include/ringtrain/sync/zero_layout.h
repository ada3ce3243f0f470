// ZeRO-1's partition of the flat parameter buffer (--zero 1): every bucket of
// the BucketPlan is cut into `world` equal blocks (the last padded with
// zeros), and rank r owns block r of every bucket. So each bucket is
// reduce-scattered as soon as backward has finished it, exactly as it would
// be all-reduced, and rank r's shard (optimizer state, master weights,
// reduced gradients) is the concatenation of its blocks: one contiguous
// buffer of shard_count() elements, the same size on every rank.
//
//   flat buffer:   |------ bucket 0 ------|---- bucket 1 ----|
//   staging:       |b0 r0|b0 r1|b0 r2|pad |b1 r0|b1 r1|b1 r2|pad    (world 3)
//   rank 1 shard:  |b0 r1|b1 r1|
//
// The staging buffer (padded_count() = world x shard_count() elements) is
// what the collectives read and write: a bucket's region is the input of its
// reduce-scatter and the output of its all-gather.
#pragma once

#include <cstddef>
#include <vector>

#include "ringtrain/sync/bucket_plan.h"

namespace ringtrain {

struct ZeroBlock {
  std::size_t bucket_offset = 0;  // the bucket in the flat buffer
  std::size_t bucket_count = 0;
  std::size_t block = 0;           // elements per rank: ceil(bucket_count / world)
  std::size_t shard_offset = 0;    // where this bucket's block starts in the shard
  std::size_t staging_offset = 0;  // world x shard_offset: the bucket's region in staging
  // The elements of the flat buffer this rank owns in this bucket:
  // [own_offset, own_offset + own_count), stored at shard_offset. own_count <
  // block for the last rank(s) when world does not divide the bucket.
  std::size_t own_offset = 0;
  std::size_t own_count = 0;
};

class ZeroLayout {
 public:
  ZeroLayout(const BucketPlan& plan, int world, int rank);

  int world() const { return world_; }
  int rank() const { return rank_; }
  const std::vector<ZeroBlock>& blocks() const { return blocks_; }  // one per bucket
  std::size_t shard_count() const { return shard_count_; }
  std::size_t padded_count() const { return shard_count_ * static_cast<std::size_t>(world_); }
  std::size_t param_count() const { return param_count_; }

 private:
  int world_;
  int rank_;
  std::vector<ZeroBlock> blocks_;
  std::size_t shard_count_ = 0;
  std::size_t param_count_ = 0;
};

}  // namespace ringtrain
