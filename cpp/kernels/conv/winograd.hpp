// Winograd F(2x2, 3x3) form of 3x3 convolutions at unit strides and
// dilations (Lavin and Gray, "Fast Algorithms for Convolutional Neural
// Networks", 2016): each 2x2 block of outputs from the 4x4 block of inputs
// under it, with 16 multiplications per (input, output channel) pair
// instead of 36. Used by the convolution plan (plan.cpp) for the forward, the data gradient (as a
// forward of dy) and the weight gradient.
#pragma once

#include <cstdint>

namespace ipuxl {
namespace conv_winograd {

// One 2-D convolution with a 3x3 kernel, unit strides and dilations, NCHW,
// in G groups.
struct Problem {
  int64_t N = 0, G = 1, Cg = 0, Mg = 0;  // batch, groups, channels per group in / out
  int64_t IH = 0, IW = 0, OH = 0, OW = 0;
  int64_t ph = 0, pw = 0;  // leading pads (the trailing ones follow from OH, OW)
};

// Whether this form runs the problem: 32+ channels per group on both sides
// (the 16 products per block are GEMMs over the input channels), and the
// channels-last copy of the batch within 2^24 floats.
// (ConvOptions::no_winograd keeps the plan from choosing it.)
bool applies(const Problem& p);

// Y[N][G*Mg][OH][OW] = the convolution of X[N][G*Cg][IH][IW] with W, where
// W is [G*Mg][Cg][3][3], or, with `flipped`, [G*Cg][Mg][3][3] read
// transposed per group with the taps reversed (a data gradient run as a
// forward, as geom.hpp's data_grad_as_forward describes). Returns false,
// with Y untouched, when X or W holds an infinity or NaN: the transforms
// add and subtract inputs whose products the direct sum keeps apart, so
// inf - inf would give NaN where the direct form gives inf.
bool forward(const Problem& p, const float* X, const float* W, float* Y, bool flipped);

// dW[G*Mg][Cg][3][3] = the weight gradient of that convolution from its
// output gradient dY[N][G*Mg][OH][OW] and input X: per block of tiles, the
// gradient of the 16 products (dU_xi = dM_xi V_xi with dM = A dY A^T) in a
// fixed number of partial sums over the tiles, then G^T dU G. Returns
// false, with dW unspecified, when X or dY holds an infinity or NaN.
bool weights_grad(const Problem& p, const float* dY, const float* X, float* dW);

}  // namespace conv_winograd
}  // namespace ipuxl
