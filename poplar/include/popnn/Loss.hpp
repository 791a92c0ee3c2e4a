// ipuxl's PopLibs: popnn losses over a batch of class probabilities.
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>

namespace popnn {
enum LossType { SUM_SQUARED_LOSS, CROSS_ENTROPY_LOSS };

/// For modelOutputs [batch, classes] (probabilities) and expected [batch]
/// (class indices): loss [batch] (-log p[label] or half the squared error),
/// deltas [batch, classes] = p - onehot(label).
poplar::program::Program calcLoss(poplar::Graph &graph, const poplar::Tensor &modelOutputs,
                                  const poplar::Tensor &expected, const poplar::Tensor &loss,
                                  const poplar::Tensor &deltas, const poplar::Tensor &deltasScale,
                                  const poplar::Tensor &modelOutputScaling, LossType lossType,
                                  const poplar::DebugContext &dc = {});
poplar::program::Program calcLoss(poplar::Graph &graph, const poplar::Tensor &modelOutputs,
                                  const poplar::Tensor &expected, const poplar::Tensor &loss,
                                  const poplar::Tensor &deltas, LossType lossType, const poplar::DebugContext &dc = {});
/// As above, and adds the number of rows whose largest output is the
/// expected class to numCorrect (one unsigned element).
poplar::program::Program calcLoss(poplar::Graph &graph, const poplar::Tensor &modelOutputs,
                                  const poplar::Tensor &expected, const poplar::Tensor &loss,
                                  const poplar::Tensor &deltas, const poplar::Tensor &numCorrect, LossType lossType,
                                  const poplar::DebugContext &dc = {});
poplar::program::Program calcAccuracy(poplar::Graph &graph, const poplar::Tensor &modelOutputs,
                                      const poplar::Tensor &expected, const poplar::Tensor &numCorrect,
                                      const poplar::DebugContext &dc = {});
/// The index of the largest element of each row of a [batch, classes] tensor (UNSIGNED_INT [batch]).
poplar::Tensor argMax(poplar::Graph &graph, const poplar::Tensor &input, poplar::program::Sequence &prog,
                      const poplar::DebugContext &dc = {});
/// The index of the smallest element of each row of a [batch, classes] tensor (UNSIGNED_INT [batch]).
poplar::Tensor argMin(poplar::Graph &graph, const poplar::Tensor &input, poplar::program::Sequence &prog,
                      const poplar::DebugContext &dc = {});
} // namespace popnn
