// ipuxl's PopLibs: poplin convolutions (poplin/Convolution.hpp).
//
// Layouts, as the Poplar API documents them: the input is
// [B][numConvGroups * inChansPerGroup][field...], the weights
// [numConvGroups][outChansPerGroup][inChansPerGroup][kernel...], and the
// output [B][numConvGroups * outChansPerGroup][outField...].
//
// ipuxl's implementation: one vertex per tile holding part of the output,
// computing each of its elements from the ConvParams transforms (see
// ConvParams.hpp); products accumulate in double and are stored in the
// output type. Options are those of poplin::ConvOptions (below); they are
// validated and do not change the result.
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplin/ConvParams.hpp>
#include <poplin/MatMul.hpp>

namespace poplin {

/// Validated convolution options. The option names, as poplin documents
/// them: "availableMemoryProportion" (0 < p <= 1), "partialsType" ("half",
/// "float"), "pass" (NONE, NONE_MATMUL, INFERENCE_FWD, TRAINING_FWD,
/// TRAINING_BWD, TRAINING_WU, FC_INFERENCE_FWD, FC_TRAINING_FWD,
/// FC_TRAINING_BWD, FC_TRAINING_WU), "use128BitConvUnitLoad",
/// "enableMultiStageReduce", "enableFastReduce", "enableConvDithering",
/// "remapOutputTensor", "gatherConvOutput" ("true", "false"). Any other
/// name, or a bad value, throws poplar::invalid_option.
struct ConvOptions {
  double availableMemoryProportion = 0.6;
  std::string partialsType = "float";
  std::string pass = "NONE";
  explicit ConvOptions(const poplar::OptionFlags &options = {});
};

/// A weight tensor [G][OC][IC][kernel...] for `params`, mapped linearly.
poplar::Tensor createWeights(poplar::Graph &graph, const ConvParams &params, const poplar::DebugContext &dc = {},
                             const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
/// An input tensor [B][G * IC][field...] for `params`, mapped linearly.
poplar::Tensor createInput(poplar::Graph &graph, const ConvParams &params, const poplar::DebugContext &dc = {},
                           const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);

/// The convolution of `in` with `weights` as `params` describes; the result
/// has params.outputType. With `transposeAndFlipWeights` the weights are
/// given as [G][IC][OC][kernel...] (the forward pass's, for the input
/// gradient with getGradientParams): their channel axes are swapped and
/// every kernel axis reversed.
poplar::Tensor convolution(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Tensor &weights,
                           const ConvParams &params, bool transposeAndFlipWeights, poplar::program::Sequence &prog,
                           const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {},
                           PlanningCache *cache = nullptr);

/// The gradient of the weights of the convolution `params`, from the output
/// gradient `zDeltas` [B][G * OC][outField...] and the forward input
/// `activations` [B][G * IC][field...]: [G][OC][IC][kernel...], in
/// params.outputType.
poplar::Tensor calculateWeightDeltas(poplar::Graph &graph, const poplar::Tensor &zDeltas,
                                     const poplar::Tensor &activations, const ConvParams &params,
                                     poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                                     const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);

/// weights += scale * calculateWeightDeltas(...).
void convolutionWeightUpdate(poplar::Graph &graph, const poplar::Tensor &zDeltas, const poplar::Tensor &weights,
                             const poplar::Tensor &activations, ConvParams params, const poplar::Tensor &scale,
                             poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                             const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
void convolutionWeightUpdate(poplar::Graph &graph, const poplar::Tensor &zDeltas, const poplar::Tensor &weights,
                             const poplar::Tensor &activations, ConvParams params, float scale,
                             poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                             const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);

/// Copies `weightsIn` [G][OC][IC][kernel...] transposed and flipped into
/// `weightsOut` [G][IC][OC][kernel...].
void weightsTransposeChansFlipXY(poplar::Graph &graph, const poplar::Tensor &weightsIn,
                                 const poplar::Tensor &weightsOut, poplar::program::Sequence &prog,
                                 const poplar::DebugContext &dc = {});

} // namespace poplin
