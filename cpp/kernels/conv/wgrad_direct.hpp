// Direct weight gradient for unit strides (1 or 2 spatial axes), with the
// positions numbered over padded rows as in the tap path: x is padded once
// per call into planes IWp = OW + (kw-1)*dw wide, dy laid out over the same
// rows (zeros in each row's last (kw-1)*dw columns and past the end), so
//   dw[m, c, kh, kw] = sum_n sum_p dyp[n, m, p] * xpad[n, c, p + kh*dh*IWp + kw*dw]
// is a plain dot product over a contiguous range of p. The micro-kernel
// keeps MB output channels x NT taps of one kernel row as vector
// accumulators over p (per vector of positions: MB loads of dy, NT shifted
// loads of x, MB*NT multiply-adds); the accumulators are carried in memory
// across images and summed across lanes once at the end. A task owns a
// block of output channels and a few input channels of one group and runs
// over every image in order, so each element of dw is summed in the same
// order whatever the thread count.
#pragma once

#include <cstdint>

#include "geom.hpp"

namespace ipuxl {
namespace conv {

// Whether this weight gradient's shape suits the direct kernel: unit
// strides, 1 or 2 spatial axes, not pointwise, and something to sum.
bool direct_wgrad_applies(const Geom& g);

// DW = the weight gradient from DY and X.
// Returns false, with DW unspecified, when x holds an infinity or NaN: the
// padded rows multiply each row's wasted positions (zeros of dy) by x
// values the true sum never reads for that tap, and 0 * inf would turn a
// finite gradient into NaN.
bool run_weights_grad_direct(const Geom& g, const float* DY, const float* X, float* DW);

}  // namespace conv
}  // namespace ipuxl
