// ipuxl's PopLibs: poplin convolution utilities (poplin/ConvUtil.hpp).
#pragma once
#include <poplin/ConvParams.hpp>

namespace poplin {

/// The size of `size` elements dilated by `dilation`.
unsigned getDilatedSize(unsigned size, unsigned dilation);

/// The index of the input element multiplied by kernel element
/// `kernelIndex` to produce output element `outputIndex` of dimension
/// `dim`, or ~0U if there is none (padding).
unsigned getInputIndex(unsigned dim, unsigned outputIndex, unsigned kernelIndex, const ConvParams &params);

/// The parameters of the backward (input gradient) pass of the forward
/// convolution `params`: convolving the output gradient with the
/// transposed and flipped weights (`convolution(...,
/// transposeAndFlipWeights = true, ...)`) gives the input gradient. ipuxl
/// supports forward parameters whose input transform is padding only and
/// whose kernel transform is dilation only (ONNX convolutions); others throw
/// poputil::poplibs_error.
ConvParams getGradientParams(const ConvParams &params);

} // namespace poplin
