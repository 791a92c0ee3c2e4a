// ipuxl's PopLibs: popnn layer normalisation: group normalisation with one group
// (see popnn/GroupNorm.hpp for the shapes and the formulas).
#pragma once
#include <popnn/GroupNorm.hpp>

namespace popnn {
namespace ln {

inline std::pair<poplar::Tensor, poplar::Tensor>
layerNormStatistics(poplar::Graph &graph, const poplar::Tensor acts, float eps, poplar::program::Sequence &prog,
                    bool unbiasedVarEstimate, bool stableAlgo = false, const poplar::Type &partialsType = poplar::FLOAT,
                    const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {}) {
  return gn::groupNormStatistics(graph, acts, eps, prog, 1, unbiasedVarEstimate, stableAlgo, partialsType,
                                 debugContext, options);
}
inline poplar::Tensor layerNormWhiten(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &mean,
                                      const poplar::Tensor &invStdDev, poplar::program::Sequence &prog,
                                      const poplar::DebugContext &debugContext = {},
                                      const poplar::OptionFlags &options = {}) {
  return gn::groupNormWhiten(graph, acts, mean, invStdDev, prog, debugContext, options);
}
inline std::pair<poplar::Tensor, poplar::Tensor>
layerNormalise(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &gamma, const poplar::Tensor &beta,
               const poplar::Tensor &mean, const poplar::Tensor &invStdDev, poplar::program::Sequence &prog,
               const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {}) {
  return gn::groupNormalise(graph, acts, gamma, beta, mean, invStdDev, prog, debugContext, options);
}
inline std::pair<poplar::Tensor, poplar::Tensor>
layerNormParamGradients(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &gradsIn,
                        const poplar::Tensor &mean, const poplar::Tensor &iStdDev, poplar::program::Sequence &prog,
                        const poplar::Type &partialsType = poplar::FLOAT, const poplar::DebugContext &debugContext = {},
                        const poplar::OptionFlags &options = {}) {
  return gn::groupNormParamGradients(graph, acts, gradsIn, mean, iStdDev, prog, partialsType, debugContext, options);
}
inline std::pair<poplar::Tensor, poplar::Tensor>
layerNormParamGradients(poplar::Graph &graph, const poplar::Tensor &actsWhitened, const poplar::Tensor &gradsIn,
                        poplar::program::Sequence &prog, const poplar::Type &partialsType = poplar::FLOAT,
                        const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {}) {
  return gn::groupNormParamGradients(graph, actsWhitened, gradsIn, prog, partialsType, debugContext, options);
}
inline poplar::Tensor layerNormGradients(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &gradsIn,
                                         const poplar::Tensor &mean, const poplar::Tensor &invStdDev,
                                         const poplar::Tensor &gamma, poplar::program::Sequence &prog,
                                         const poplar::Type &partialsType = poplar::FLOAT,
                                         const poplar::DebugContext &debugContext = {},
                                         const poplar::OptionFlags &options = {}) {
  return gn::groupNormGradients(graph, acts, gradsIn, mean, invStdDev, gamma, prog, partialsType, debugContext, options);
}
inline poplar::Tensor layerNormGradients(poplar::Graph &graph, const poplar::Tensor &actsWhitened,
                                         const poplar::Tensor &gradsIn, const poplar::Tensor &invStdDev,
                                         const poplar::Tensor &gamma, poplar::program::Sequence &prog,
                                         const poplar::Type &partialsType = poplar::FLOAT,
                                         const poplar::DebugContext &debugContext = {},
                                         const poplar::OptionFlags &options = {}) {
  return gn::groupNormGradients(graph, actsWhitened, gradsIn, invStdDev, gamma, prog, partialsType, debugContext,
                                options);
}
inline void layerNormParamUpdate(poplar::Graph &graph, const poplar::Tensor &gammaDelta, const poplar::Tensor &betaDelta,
                                 float scale, poplar::Tensor &gamma, poplar::Tensor &beta,
                                 poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                                 const poplar::OptionFlags &options = {}) {
  gn::groupNormParamUpdate(graph, gammaDelta, betaDelta, scale, gamma, beta, prog, debugContext, options);
}
inline void layerNormParamUpdate(poplar::Graph &graph, const poplar::Tensor &gammaDelta, const poplar::Tensor &betaDelta,
                                 const poplar::Tensor &scale, poplar::Tensor &gamma, poplar::Tensor &beta,
                                 poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                                 const poplar::OptionFlags &options = {}) {
  gn::groupNormParamUpdate(graph, gammaDelta, betaDelta, scale, gamma, beta, prog, debugContext, options);
}

} // namespace ln
} // namespace popnn
