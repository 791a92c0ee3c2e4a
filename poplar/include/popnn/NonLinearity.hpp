// ipuxl's PopLibs: popnn non-linearities. Element-wise ones are popops
// maps; the softmaxes normalise over the innermost dimension.
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <popnn/NonLinearityDef.hpp>

namespace popnn {
poplar::Tensor nonLinearity(poplar::Graph &graph, NonLinearityType type, poplar::Tensor t,
                            poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                            const poplar::OptionFlags &options = {});
void nonLinearityInPlace(poplar::Graph &graph, NonLinearityType type, poplar::Tensor t,
                         poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                         const poplar::OptionFlags &options = {});
/// The gradient of the non-linearity, given its output (its input for GELU, GELU_ERF, SWISH) and the output's gradient.
poplar::Tensor nonLinearityInputGradient(poplar::Graph &graph, NonLinearityType type, poplar::Tensor act,
                                         poplar::Tensor outGradient, poplar::program::Sequence &prog,
                                         const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {});
} // namespace popnn
