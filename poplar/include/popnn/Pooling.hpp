// ipuxl's PopLibs: popnn pooling (popnn/Pooling.hpp).
//
// Tensors are [B][C][field...]. Each window of `kernelShape` steps by
// `stride` over the input field, extended at each end by
// inputTruncationOrPaddingLower / Upper (negative values truncate). MAX
// takes the maximum of a window's input elements (NaN if any is NaN), SUM
// their sum, AVG their sum divided by the number of input elements in the
// window: padding is never counted (ipuxl's choice, as PopART's
// count_include_pad = 0). One vertex per tile holding part of the result.
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <popnn/PoolingDef.hpp>
#include <vector>

namespace popnn {
namespace pooling {

struct PoolParams {
  PoolingType poolingType;
  std::vector<std::size_t> inputFieldShape;
  std::vector<std::size_t> kernelShape;
  std::vector<unsigned> stride;
  std::vector<int> inputTruncationOrPaddingLower;
  std::vector<int> inputTruncationOrPaddingUpper;
  std::size_t numChannels;
  std::size_t batchSize;
  poplar::Type dType;

  PoolParams(PoolingType poolingType, std::vector<std::size_t> inputFieldShape, std::vector<std::size_t> kernelShape,
             std::vector<unsigned> stride, std::vector<int> inputTruncationOrPaddingLower,
             std::vector<int> inputTruncationOrPaddingUpper, std::size_t numChannels, std::size_t batchSize,
             poplar::Type dType);
  std::size_t getNumFieldDims() const { return inputFieldShape.size(); }
  /// floor((in + lower + upper - kernel) / stride) + 1 per dimension.
  std::vector<std::size_t> getOutputFieldShape() const;
};

/// The pooled tensor [B][C][outField...].
poplar::Tensor pool(poplar::Graph &graph, const PoolParams &params, const poplar::Tensor &in,
                    poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                    const poplar::OptionFlags &options = {});

/// The input gradient of MAX pooling: each window's gradient goes to every
/// input element equal to the window's maximum (`pooled`), divided by the
/// number of such elements when `useScaledGradient`.
poplar::Tensor poolInputGradient(poplar::Graph &graph, const PoolParams &params, const poplar::Tensor &in,
                                 const poplar::Tensor &pooled, const poplar::Tensor &pooledGradient,
                                 bool useScaledGradient, poplar::program::Sequence &prog,
                                 const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {});

/// The input gradient of AVG or SUM pooling: each window's gradient goes to
/// each of its input elements, divided by their number when
/// `useScaledGradient` (the AVG gradient). `fwdChansPerGroup` is a layout
/// hint and does not change the result.
poplar::Tensor poolInputGradient(poplar::Graph &graph, const PoolParams &params, const unsigned fwdChansPerGroup,
                                 const poplar::Tensor &pooledGradient, bool useScaledGradient,
                                 poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                                 const poplar::OptionFlags &options = {});

} // namespace pooling
} // namespace popnn
