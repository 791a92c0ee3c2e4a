// The channels-in-vectors form of a forward convolution (and of a data
// gradient run as one): vector lanes hold output channels, and a tile of R
// consecutive output positions of one row x NV vectors of channels keeps
// R x NV accumulators over every tap and input channel. Each image is
// copied once into a zero-padded channels-last buffer xl[row][col][Cg], so
// the input of tap (kh, kw) for position r of a tile is Cg contiguous floats
// at a fixed offset, and the weights are packed as [block][channel block of
// kOcCB][tap][channel][NV*V]: per (tap, channel) step NV vector loads of
// weights and R broadcasts of x feed R * NV multiply-adds, the GEMM
// micro-kernel's shape (14 x 2 vectors at AVX-512, 6 x 2 at AVX2). Unlike
// the row strips of direct_task no lane is spent past a row's end: a
// 14-wide row is one tile of 14 positions (strips of 16-lane vectors over
// the padded rows computed 240 positions for 196 there). Every output
// element is summed in one fixed order (channel blocks, then taps, then the
// block's channels), whatever the thread count. With `flipped`, as for
// run_forward_direct (direct.hpp).
#pragma once

#include <cstdint>

#include "geom.hpp"

namespace ipuxl {
namespace conv {

// Output channels per block of the channels-in-vectors form at the level in
// use: two vectors (AVX-512: 32, AVX2: 16); 0 at the 4-wide levels, which
// have no such kernel.
int64_t oc_block();

// Whether the direct forward of this shape should take the channels-in-
// vectors form: a whole number of channel blocks, 16+ input channels, a
// long reduction, row forms that would leave a sixth or more of their
// lanes past the rows' ends, and the channels-last copies of the batch
// within 2^24 floats.
bool oc_form_applies(const Geom& g);

// Y = the forward of X with W (or, `flipped`, the data gradient as a
// forward, as run_forward_direct describes).
void run_forward_oc(const Geom& g, const float* X, const float* W, float* Y, bool flipped);

}  // namespace conv
}  // namespace ipuxl
