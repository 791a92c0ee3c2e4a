// ipuxl's PopLibs, internal: the arithmetic of a window sliding over a
// field, shared by poplin's ConvParams transforms and popnn's PoolParams.
// One dimension at a time: truncation, dilation (zeros between elements),
// padding, and the positions of a strided window.
#pragma once
#include <cstddef>

namespace poputil {
namespace ipuxl {

/// `size` elements less `lower` + `upper` truncated from the ends (0 if none are left).
inline std::size_t truncatedSize(std::size_t size, std::size_t lower, std::size_t upper) {
  return size > lower + upper ? size - lower - upper : 0;
}

/// `size` elements with `dilation` - 1 zeros between neighbours.
inline std::size_t dilatedSize(std::size_t size, std::size_t dilation) {
  return size ? (size - 1) * dilation + 1 : 0;
}

/// Every `stride`-th of `size` elements, the first included.
inline std::size_t stridedSize(std::size_t size, std::size_t stride) { return size ? (size - 1) / stride + 1 : 0; }

/// How far a window of `kernel` elements dilated by `dilation` can move over
/// `size` elements padded by `lower` and `upper` (negative: it does not fit).
inline long windowSpan(long size, long lower, long upper, long kernel, long dilation = 1) {
  return size + lower + upper - static_cast<long>(dilatedSize(static_cast<std::size_t>(kernel), dilation));
}

/// The positions of a window moving `stride` at a time over a span (0 if it does not fit).
inline std::size_t windowPositions(long span, long stride) {
  return span < 0 ? 0 : static_cast<std::size_t>(span / stride + 1);
}

} // namespace ipuxl
} // namespace poputil
