// ipuxl's PopLibs: popnn group normalisation. Activations are [B][C][..F..];
// the C channels are split in numGroups groups and each (batch, group) is
// normalised over its channels and field. mean and invStdDev are {B * numGroups}
// (index b * numGroups + g), of the activations' type.
//
// Option groupNormStridedChannelGrouping (true, false) [=false]: channel c
// is in group c % numGroups when true, c / (C / numGroups) when false.
// (The SDK's header documents true as the default; its library, and PopART,
// behave as false. ipuxl follows the library; pass the option to be explicit.)
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <utility>

namespace popnn {
namespace gn {

/// Mean and inverse standard deviation 1/sqrt(var + eps) of each group
/// (var: biased, or unbiased n/(n-1) when unbiasedVarEstimate). ipuxl always
/// computes the variance around the mean (the stable algorithm), in partialsType
/// or the activations' type if that is wider.
std::pair<poplar::Tensor, poplar::Tensor>
groupNormStatistics(poplar::Graph &graph, const poplar::Tensor acts, float eps, poplar::program::Sequence &prog,
                    unsigned numGroups, bool unbiasedVarEstimate, bool stableAlgo = false,
                    const poplar::Type &partialsType = poplar::FLOAT, const poplar::DebugContext &debugContext = {},
                    const poplar::OptionFlags &options = {});
/// (acts - mean) * invStdDev, per group.
poplar::Tensor groupNormWhiten(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &mean,
                               const poplar::Tensor &invStdDev, poplar::program::Sequence &prog,
                               const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});
/// {whitened * gamma + beta, whitened}; gamma and beta are {C}.
std::pair<poplar::Tensor, poplar::Tensor>
groupNormalise(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &gamma, const poplar::Tensor &beta,
               const poplar::Tensor &mean, const poplar::Tensor &invStdDev, poplar::program::Sequence &prog,
               const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});
/// {gammaDelta, betaDelta}: sum over batch and field of gradsIn * whitened, and of gradsIn ({C} each).
std::pair<poplar::Tensor, poplar::Tensor>
groupNormParamGradients(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &gradsIn,
                        const poplar::Tensor &mean, const poplar::Tensor &iStdDev, poplar::program::Sequence &prog,
                        const poplar::Type &partialsType = poplar::FLOAT, const poplar::DebugContext &debugContext = {},
                        const poplar::OptionFlags &options = {});
std::pair<poplar::Tensor, poplar::Tensor>
groupNormParamGradients(poplar::Graph &graph, const poplar::Tensor &actsWhitened, const poplar::Tensor &gradsIn,
                        poplar::program::Sequence &prog, const poplar::Type &partialsType = poplar::FLOAT,
                        const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});
/// The gradient with respect to acts through the whole layer (statistics
/// included): invStdDev * (g - mean(g) - whitened * mean(g * whitened)), g = gradsIn * gamma,
/// means over each group.
poplar::Tensor groupNormGradients(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &gradsIn,
                                  const poplar::Tensor &mean, const poplar::Tensor &invStdDev,
                                  const poplar::Tensor &gamma, poplar::program::Sequence &prog,
                                  const poplar::Type &partialsType = poplar::FLOAT,
                                  const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});
poplar::Tensor groupNormGradients(poplar::Graph &graph, const poplar::Tensor &actsWhitened, const poplar::Tensor &gradsIn,
                                  const poplar::Tensor &invStdDev, const poplar::Tensor &gamma,
                                  poplar::program::Sequence &prog, const poplar::Type &partialsType = poplar::FLOAT,
                                  const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});
/// gamma += gammaDelta * scale; beta += betaDelta * scale.
void groupNormParamUpdate(poplar::Graph &graph, const poplar::Tensor &gammaDelta, const poplar::Tensor &betaDelta,
                          float scale, poplar::Tensor &gamma, poplar::Tensor &beta, poplar::program::Sequence &prog,
                          const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});
void groupNormParamUpdate(poplar::Graph &graph, const poplar::Tensor &gammaDelta, const poplar::Tensor &betaDelta,
                          const poplar::Tensor &scale, poplar::Tensor &gamma, poplar::Tensor &beta,
                          poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                          const poplar::OptionFlags &options = {});

} // namespace gn
} // namespace popnn
