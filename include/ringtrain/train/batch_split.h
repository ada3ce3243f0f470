// How a step's samples are split over the ranks, in the two ways a run can
// ask for it:
//   --batch B         each rank takes B per micro-step; the global batch is
//                     B x world x accum, and gradients are averaged over ranks.
//   --global-batch G  the step takes G samples whatever the world size: each
//                     micro-step's G/accum are split floor/ceil over the ranks,
//                     each rank's loss is its sum divided by G, and gradients
//                     are summed over ranks. The step is then the same
//                     computation at any world size (up to float summation
//                     order), and a checkpoint resumes on any world size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ringtrain/comm/communicator.h"
#include "ringtrain/data/sharded_sampler.h"
#include "ringtrain/train/train_config.h"

namespace ringtrain {

// The training sampler for this rank. Throws Error (naming the flag) when the
// data set holds less than one global batch or a rank would get no sample.
ShardedSampler make_train_sampler(const TrainConfig& cfg, std::size_t n, int rank, int world);

// The factor Model::backward applies to the mean loss of a micro-batch of
// `micro_batch` samples on this rank.
float micro_batch_grad_scale(const TrainConfig& cfg, std::size_t micro_batch);

// How the gradient all-reduce combines ranks.
ReduceOp gradient_reduce_op(const TrainConfig& cfg);

// The reference batch of --lr-scaling linear when --reference-batch is 0.
std::size_t default_reference_batch(const TrainConfig& cfg);

// The start-up line: the global batch and what each rank takes of it.
std::string describe_batch_split(const TrainConfig& cfg, const ShardedSampler& sampler);

}  // namespace ringtrain
