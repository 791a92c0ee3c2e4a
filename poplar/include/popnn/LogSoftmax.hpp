#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
namespace popnn {
/// log(softmax(t)) over the innermost dimension, computed stably.
poplar::Tensor logSoftmax(poplar::Graph &graph, poplar::Tensor t, poplar::program::Sequence &prog,
                          const poplar::DebugContext &dc = {});
void logSoftmaxInPlace(poplar::Graph &graph, poplar::Tensor t, poplar::program::Sequence &prog,
                       const poplar::DebugContext &dc = {});
} // namespace popnn
