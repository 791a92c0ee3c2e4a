// ipuxl's PopLibs: popops one-hot encoding.
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>

namespace popops {

/// encoded [n, depth] gets row i = one-hot of indices[i]: `on` (1) at
/// column indices[i], `off` (0) elsewhere. indices has n elements of
/// UNSIGNED_INT or INT; a row whose index is not in [0, depth) (such as
/// MASKED_LABEL_CODE) is all `off`. on and off are one-element tensors of
/// encoded's type.
void encodeOneHot(poplar::Graph &graph, const poplar::Tensor &indices, const poplar::Tensor &encoded,
                  poplar::program::Sequence &prog, const poplar::DebugContext &dc = {});
void encodeOneHot(poplar::Graph &graph, const poplar::Tensor &indices, const poplar::Tensor &encoded,
                  poplar::program::Sequence &prog, const poplar::Tensor &on, const poplar::Tensor &off,
                  const poplar::DebugContext &dc = {});

} // namespace popops
