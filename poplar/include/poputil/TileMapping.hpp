// ipuxl's PopLibs: poputil tile-mapping helpers.
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/Tensor.hpp>
#include <vector>

namespace poputil {

/// Maps `t` over the graph's tiles in contiguous chunks of at least
/// `minElementsPerTile` elements, each a multiple of `grainSize`, in order
/// from tile 0 (as PopLibs' mapTensorLinearly).
void mapTensorLinearly(poplar::Graph &graph, const poplar::Tensor &t, unsigned minElementsPerTile,
                       unsigned grainSize);
/// As above, with a grain of one vector's width for the element type and at
/// least 128 bytes per tile.
void mapTensorLinearly(poplar::Graph &graph, const poplar::Tensor &t);
/// The linear mapping mapTensorLinearly would set, as intervals per tile.
std::vector<std::vector<poplar::Interval>> calcLinearTileMapping(const poplar::Graph &graph,
                                                                 std::vector<std::size_t> shape,
                                                                 unsigned minElementsPerTile, unsigned grainSize);
std::vector<std::vector<poplar::Interval>> calcLinearTileMapping(const poplar::Graph &graph, const poplar::Tensor &t);
/// Maps `t` (over whose elements compute is to run) like the tensor `like`.
unsigned getTileImbalance(const poplar::Graph &graph, const poplar::Tensor &t, unsigned minElementsPerTile = 0,
                          unsigned grainSize = 1);
/// The tiles that hold some element of `t`, in order.
std::vector<unsigned> getTilesForTensor(const poplar::Graph &graph, const poplar::Tensor &t);
/// Creates a tensor of `type` and `shape`, mapped linearly.
poplar::Tensor cloneToIpu(poplar::Graph &graph, const poplar::Tensor &t, unsigned dstIpu,
                          const poplar::DebugContext &dc = {});
/// The tile a scalar or small tensor of the graph goes on (PopLibs: the first).
unsigned chooseTileForScalar(const poplar::Graph &graph);

} // namespace poputil
