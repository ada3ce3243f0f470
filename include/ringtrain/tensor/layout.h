// The memory order of [C, H, W] activations: NCHW (channels first, as stored
// data, PyTorch's default and every checkpoint's weights), or NHWC
// (channels last: the order cuDNN's tensor-core convolutions read in 16 bits).
// Only activations change order; parameters keep theirs (conv weights [K, C,
// R, S]), so checkpoints and weight files are the same in either layout.
#pragma once

#include <string_view>

namespace ringtrain {

enum class Layout { nchw = 0, nhwc = 1 };

// --layout: auto lets the model decide (Model::build: NHWC for a convolutional
// model on a GPU in bf16/fp16 or with TF32 convolutions, NCHW otherwise).
enum class LayoutChoice { automatic = 0, nchw = 1, nhwc = 2 };

// "auto", "nchw", "nhwc"; an Error naming the flag otherwise.
LayoutChoice parse_layout_choice(std::string_view text);
const char* layout_name(Layout layout);  // "nchw", "nhwc"

}  // namespace ringtrain
