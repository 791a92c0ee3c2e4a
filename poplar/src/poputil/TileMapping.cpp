// ipuxl's PopLibs: poputil tile mapping (linear mapping over the tiles).
#include <algorithm>
#include <poputil/TileMapping.hpp>
#include <poputil/exceptions.hpp>

namespace poputil {

std::vector<std::vector<poplar::Interval>> calcLinearTileMapping(const poplar::Graph &graph,
                                                                 std::vector<std::size_t> shape,
                                                                 unsigned minElementsPerTile, unsigned grainSize) {
  const unsigned tiles = graph.getTarget().getNumTiles();
  std::size_t n = 1;
  for (auto d : shape) n *= d;
  if (grainSize == 0) throw poplibs_error("mapTensorLinearly: grainSize must be positive");
  std::vector<std::vector<poplar::Interval>> m(tiles);
  if (n == 0) return m;
  // Grains are spread evenly over the tiles, each tile taking at least
  // minElementsPerTile (rounded to whole grains), from tile 0 upwards.
  std::size_t grains = (n + grainSize - 1) / grainSize;
  std::size_t minGrains = std::max<std::size_t>(1, (minElementsPerTile + grainSize - 1) / grainSize);
  std::size_t perTile = std::max(minGrains, (grains + tiles - 1) / tiles);
  std::size_t at = 0;
  for (unsigned t = 0; t < tiles && at < n; ++t) {
    std::size_t end = std::min(n, at + perTile * grainSize);
    m[t].emplace_back(at, end);
    at = end;
  }
  return m;
}

std::vector<std::vector<poplar::Interval>> calcLinearTileMapping(const poplar::Graph &graph, const poplar::Tensor &t) {
  const auto &target = graph.getTarget();
  unsigned grain = target.getVectorWidth(t.elementType());
  unsigned minBytes = 128;
  unsigned minElems = std::max(1u, minBytes / target.getTypeSize(t.elementType()));
  return calcLinearTileMapping(graph, t.shape(), minElems, grain);
}

void mapTensorLinearly(poplar::Graph &graph, const poplar::Tensor &t, unsigned minElementsPerTile, unsigned grainSize) {
  graph.setTileMapping(t, calcLinearTileMapping(graph, t.shape(), minElementsPerTile, grainSize));
}

void mapTensorLinearly(poplar::Graph &graph, const poplar::Tensor &t) {
  graph.setTileMapping(t, calcLinearTileMapping(graph, t));
}

unsigned getTileImbalance(const poplar::Graph &graph, const poplar::Tensor &t, unsigned, unsigned) {
  auto m = graph.getTileMapping(t);
  std::size_t mx = 0, total = 0;
  for (const auto &iv : m) {
    std::size_t s = 0;
    for (const auto &i : iv) s += i.size();
    mx = std::max(mx, s);
    total += s;
  }
  return static_cast<unsigned>(mx - total / std::max<std::size_t>(1, m.size()));
}

std::vector<unsigned> getTilesForTensor(const poplar::Graph &graph, const poplar::Tensor &t) {
  auto m = graph.getTileMapping(t, false);
  std::vector<unsigned> out;
  for (unsigned i = 0; i < m.size(); ++i)
    if (!m[i].empty()) out.push_back(i);
  return out;
}

poplar::Tensor cloneToIpu(poplar::Graph &graph, const poplar::Tensor &t, unsigned, const poplar::DebugContext &dc) {
  return graph.clone(t, dc);
}

unsigned chooseTileForScalar(const poplar::Graph &) { return 0; }

} // namespace poputil
