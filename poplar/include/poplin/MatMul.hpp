// ipuxl's PopLibs: poplin matrix multiplication.
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <vector>

namespace poplin {

class PlanningCache {
public:
  PlanningCache() = default;
};

/// C = A * B for A [m, k] and B [k, n] (or grouped: [g, m, k] x [g, k, n]).
/// The output is mapped linearly; one vertex per run of an output row on a tile.
poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::Type &outputType,
                      const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {},
                      PlanningCache *cache = nullptr);
poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                      const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
void matMulWithOutput(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B, poplar::Tensor &out,
                      poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                      const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
poplar::Tensor matMulGrouped(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                             poplar::program::Sequence &prog, const poplar::Type &outputType,
                             const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {},
                             PlanningCache *cache = nullptr);
/// C += k * A * B
void matMulAcc(poplar::Graph &graph, const poplar::Tensor &C, float k, const poplar::Tensor &A,
               const poplar::Tensor &B, poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
               const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);

poplar::Tensor createMatMulInputLHS(poplar::Graph &graph, const poplar::Type &dataType,
                                    const std::vector<std::size_t> &aShape, const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {},
                                    PlanningCache *cache = nullptr);
poplar::Tensor createMatMulInputLHS(poplar::Graph &graph, const poplar::Type &inputType, const poplar::Type &outputType,
                                    const std::vector<std::size_t> &aShape, const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {},
                                    PlanningCache *cache = nullptr);
poplar::Tensor createMatMulInputRHS(poplar::Graph &graph, const poplar::Type &dataType,
                                    const std::vector<std::size_t> &aShape, const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {},
                                    PlanningCache *cache = nullptr);
poplar::Tensor createMatMulInputRHS(poplar::Graph &graph, const poplar::Type &inputType, const poplar::Type &outputType,
                                    const std::vector<std::size_t> &aShape, const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {},
                                    PlanningCache *cache = nullptr);

} // namespace poplin
