// Small graphs of branch points, whose gradients sum two contributions.
// Shared by fused_conv_relu_test and gpu_fused_conv_relu_test.
//
// kBranchFirst: a fused conv + bias + ReLU node's dx is the first
// contribution to a summed gradient: r1 is read by tap and by c2, which is
// fused with r2 and comes later in the plan, so its backward runs first (on
// the CPU its 16-bit dx widened into the fp32 sum) and tap's is added after
// (add_widened). On a GPU tap's 16-bit convolution is on the grid too, and
// the two are summed in 16 bits (a paired gradient).
#pragma once

#include <cstddef>

namespace ringtrain::test {

inline constexpr const char* kBranchFirst = R"(input(3, 8, 8)
c1 = conv2d(out=4, kernel=3, padding=1)
r1 = relu
tap = conv2d(r1, out=4, kernel=1, bias=0)
c2 = conv2d(r1, out=4, kernel=3, padding=1)
r2 = relu
sum = add(r2, tap)
c3 = conv2d(out=4, kernel=3, padding=1)
r3 = relu
flat = flatten
fc = linear(out=5)
)";
// kTwoOnGrid: r1 is read by two fused conv + bias + ReLU nodes, whose dx are
// on the grid on every device: under bf16/fp16 r1's gradient is paired (the
// first written in place in 16 bits, the second summed into it in one pass),
// where the unfused plan sums the convolutions' dx in fp32.
inline constexpr const char* kTwoOnGrid = R"(input(3, 8, 8)
c1 = conv2d(out=4, kernel=3, padding=1)
r1 = relu
a = conv2d(r1, out=4, kernel=3, padding=1)
ra = relu
b = conv2d(r1, out=4, kernel=1)
rb = relu
sum = add(ra, rb)
flat = flatten
fc = linear(out=5)
)";
// kResidualOnGrid: a ResNet block's pair. r1 is read by a fused conv + bias +
// ReLU and, as the residual, by a fused BatchNorm + add + ReLU, whose
// residual gradient (dy where the ReLU passed it) is on the grid: paired under
// bf16/fp16, as a ResNet's block inputs are on a GPU.
inline constexpr const char* kResidualOnGrid = R"(input(3, 8, 8)
c1 = conv2d(out=4, kernel=3, padding=1)
r1 = relu
a = conv2d(r1, out=4, kernel=3, padding=1)
ra = relu
b = conv2d(out=4, kernel=3, padding=1, bias=0)
bn = batch_norm
sum = add(bn, r1)
r2 = relu
flat = flatten
fc = linear(out=5)
)";
// c1's parameters, first in the flat buffer: 4 x 3 x 3 x 3 weights and 4 biases.
inline constexpr std::size_t kBranchFirstC1Params = 4 * 3 * 3 * 3 + 4;

}  // namespace ringtrain::test
