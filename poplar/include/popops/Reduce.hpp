// ipuxl's PopLibs: popops reductions over dimensions of a tensor.
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <popops/Operation.hpp>
#include <vector>

namespace popops {

/// The operation, whether the result updates the output (out op= result)
/// and an optional scale of the result (a float or a scalar tensor).
struct ReduceParams {
  ReduceParams() = default;
  ReduceParams(Operation op, bool update = false) : op(op), update(update) {}
  ReduceParams(Operation op, bool update, poplar::Tensor scale) : op(op), update(update), scale(scale), useScale(true) {}
  ReduceParams(Operation op, float constantScale, bool update = false)
      : op(op), update(update), constantScale(constantScale) {}
  Operation op = Operation::ADD;
  bool update = false;
  poplar::Tensor scale;
  bool useScale = false;
  float constantScale = 1.0f;
};

poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Type &outType,
                      const std::vector<std::size_t> &dims, ReduceParams params, poplar::program::Sequence &prog,
                      const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {});
poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in, const std::vector<std::size_t> &dims,
                      ReduceParams params, poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                      const poplar::OptionFlags &options = {});
poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Type &outType,
                      const std::vector<std::size_t> &dims, ReduceParams params,
                      std::vector<poplar::ComputeSet> &css, const poplar::DebugContext &dc = {},
                      const poplar::OptionFlags &options = {});
void reduceWithOutput(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Tensor &out,
                      const std::vector<std::size_t> &dims, ReduceParams params, poplar::program::Sequence &prog,
                      const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {});
void reduceWithOutput(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Tensor &out,
                      const std::vector<std::size_t> &dims, ReduceParams params,
                      std::vector<poplar::ComputeSet> &css, const poplar::DebugContext &dc = {},
                      const poplar::OptionFlags &options = {});

} // namespace popops
