// The geometry of one convolution and the small pieces every algorithm of
// cpp/kernels/conv/ shares (see plan.hpp for how one is chosen).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "../../core/kernel.hpp"

namespace ipuxl {
namespace conv {

enum class ConvKind { Forward, DataGrad, WeightsGrad };

// Geometry of one convolution, spatial axes padded to 3 (leading 1s).
struct Geom {
  int64_t N = 0, C = 0, M = 0, G = 1, Cg = 0, Mg = 0;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  int64_t stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1}, pad[3] = {0, 0, 0};
  int64_t Isp = 1, Ksp = 1, P = 1, K = 1;
  bool pointwise = false;  // 1x1 kernel, unit strides, no padding: columns == input
};

// Validates the attributes and the three tensor shapes (x-like, w-like,
// y-like) and fills the geometry; d.fail names what is wrong.
Geom make_geom(const OpDesc& d, const Shape& xs, const Shape& ws, const Shape& ys);

// The data gradient of a convolution with unit strides is a forward
// convolution of dy (channels M, spatial out) with the weights transposed
// per group and the taps reversed, padded by reach - pad at the start of
// each axis (reach = (k-1)*dil); its output is dx (channels C, spatial in).
Geom data_grad_as_forward(const Geom& g);

// Whether the data gradient of this unit-stride convolution (1 or 2
// spatial axes, a kernel bigger than 1x1) is a forward convolution
// (data_grad_as_forward) with pads in [0, reach] at both ends of each axis
// (dx reads only real dy rows or zeros).
bool data_grad_is_forward(const Geom& g);

// Whether no value is an infinity or NaN (exponent bits all ones); an
// integer OR, so it vectorises without reassociating float sums.
bool all_finite(const float* v, int64_t n);

// Fixed number of partial sums of a batch-split weight gradient: a number
// of the shapes only, so the result is the same bits at any thread count.
constexpr int64_t kWgradParts = 4;

// The direct kernels' short-reduction bound (C/G x kernel taps) and the
// widest vector (floats) their padded rows are rounded to.
constexpr int64_t kDirectMaxK = 64, kDirectPadV = 16;

// A float buffer whose data starts on a 64-byte line (whole-vector loads of
// aligned rows then never straddle two lines), zero-filled unless `zero` is
// false (for a buffer its user writes in full before reading it).
struct LineBuf {
  std::unique_ptr<float[]> v;
  float* p;
  explicit LineBuf(size_t n, bool zero = true)
      : v(zero ? new float[n + 16]() : new float[n + 16]) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(v.get());
    p = v.get() + ((64 - a % 64) % 64) / sizeof(float);
  }
  float* data() { return p; }
};

}  // namespace conv
}  // namespace ipuxl
