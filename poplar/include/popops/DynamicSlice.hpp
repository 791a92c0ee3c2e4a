// ipuxl's PopLibs: popops dynamic slicing (offsets read at run time).
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <vector>

namespace popops {

/// The slice of t of `sizes` along `dims` starting at the offsets held in
/// `offset` (one unsigned element per dimension), clamped to stay in range.
poplar::Tensor dynamicSlice(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &offset,
                            const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                            poplar::program::Sequence &prog, const poplar::DebugContext &dc = {});
/// Writes s into t at the offsets held in `offset`.
void dynamicUpdate(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &s,
                   const poplar::Tensor &offset, const std::vector<std::size_t> &dims,
                   const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog,
                   const poplar::DebugContext &dc = {});
poplar::Tensor createSliceableTensor(poplar::Graph &graph, const poplar::Type &type, const std::vector<std::size_t> &shape,
                                     const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                                     std::size_t minGrainSize = 0, const poplar::DebugContext &dc = {});

} // namespace popops
