// ipuxl's PopLibs: popops::histogram.
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>

namespace popops {

/// Counts of the elements of `input` (of |input| with absoluteOfInput) in
/// the bins the increasing `levels` bound: bin 0 holds x < levels[0], bin i
/// levels[i-1] <= x < levels[i], the last x >= levels.back() (and NaN, which
/// no `<` holds). A FLOAT tensor of levels.numElements() + 1 elements.
poplar::Tensor histogram(poplar::Graph &graph, const poplar::Tensor &input, const poplar::Tensor &levels,
                         bool absoluteOfInput, poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                         const poplar::OptionFlags &options = {});

} // namespace popops
