// Tap-decomposed convolution for unit strides (1 or 2 spatial axes), for
// the forwards and data gradients with 16+ channels whose outputs are
// narrower than the direct kernels take, and the weight gradients with 16+
// input channels: no unfolded matrix at all. The image is copied once
// into a zero-padded buffer whose rows are exactly as wide as the output plus the kernel's
// reach (IWp = OW + (kw-1)*dw); positions are then numbered over padded rows
// (oh * IWp + ow, the last (kw-1)*dw of each row wasted), and kernel tap
// (kh, kw) reads every channel shifted by kh*dh*IWp + kw*dw: a plain strided
// matrix. So the output is a sum over taps of products
//   Y[m, pos] += Wtap[m, c] @ Xpad_shift[c, pos]
// (the GEMM reads the weights in place and packs the shifted image by plain
// row copies), accumulated in a channel-major block that stays in L2, whose
// rows are then copied into the output. The data gradient of a unit stride
// convolution is the same computation on dy with flipped, transposed
// weights; the weight gradient is one product per tap,
// Xpad_shift @ dy^T (dy in padded rows, packed once per image).
#pragma once

#include <cstdint>

#include "geom.hpp"

namespace ipuxl {
namespace conv {

// The padded-row layout of one image's channels.
struct TapGeom {
  int64_t Cin, IH, IW, ph, pw, KH, KW, dh, dw, Mo, OH, OW;
  int64_t IHp, IWp, plane;  // padded rows, padded width, plane stride (with slack)
};

TapGeom make_tap_geom(int64_t Cin, int64_t IH, int64_t IW, int64_t ph, int64_t pw, int64_t KH,
                      int64_t KW, int64_t dh, int64_t dw, int64_t Mo, int64_t OH, int64_t OW);

// xpad[c] = x[c] placed at (ph, pw) of an IHp x IWp zero plane (cropped).
void tap_pad(const TapGeom& t, const float* x, float* xpad);

// Whether the tap form runs this shape: unit strides, 1 or 2 spatial axes,
// a kernel bigger than 1x1, 16+ channels in and 8+ out (as the op reads
// them: dy's for the data gradient), and for the data gradient pads that
// make it a forward of dy.
bool tap_applies(const Geom& g, ConvKind kind);

// O = the op of `kind` on (A, B): Forward (x, w) -> y; DataGrad (dy, w) ->
// dx; WeightsGrad (x, dy) -> dw (the padded operand first).
void run_tap(const Geom& g, ConvKind kind, const float* A, const float* B, float* O);

}  // namespace conv
}  // namespace ipuxl
