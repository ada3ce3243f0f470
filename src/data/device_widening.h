// Which batches cross to a GPU as bytes: uint8 data (raw or encoded images,
// with or without a transform) goes across as its bytes, a quarter of the
// floats' size, and is widened and normalised on the device. Float data, or
// a normalisation over more channels than the kernel takes, goes as floats.
#pragma once

#include <optional>

#include "kernels/widen_bytes.cuh"
#include "ringtrain/data/dataset.h"

namespace ringtrain {

// The widening of `data`'s batches (as its transform is now), or nullopt
// when they go as floats.
std::optional<kernels::ChannelWidening> device_widening(const Dataset& data);

}  // namespace ringtrain
