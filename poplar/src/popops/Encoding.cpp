// ipuxl's PopLibs: popops::encodeOneHot as one popops::map over the
// encoded tensor: Select(on, off, index == column), the indices and the
// column numbers broadcast to [n, depth].
#include <popops/Encoding.hpp>

#include <numeric>
#include <popops/ElementWise.hpp>
#include <poputil/TileMapping.hpp>
#include <poputil/exceptions.hpp>
#include <vector>

namespace popops {
namespace pe = popops::expr;

void encodeOneHot(poplar::Graph &graph, const poplar::Tensor &indices, const poplar::Tensor &encoded,
                  poplar::program::Sequence &prog, const poplar::Tensor &on, const poplar::Tensor &off,
                  const poplar::DebugContext &dc) {
  if (encoded.rank() != 2)
    throw poputil::poplibs_error("popops::encodeOneHot: encoded must be [n, depth], got " + encoded.shapeToString());
  const std::size_t n = encoded.dim(0), depth = encoded.dim(1);
  if (indices.numElements() != n)
    throw poputil::poplibs_error("popops::encodeOneHot: indices has " + std::to_string(indices.numElements()) +
                                 " elements, encoded has " + std::to_string(n) + " rows");
  const poplar::Type it = indices.elementType();
  if (it != poplar::UNSIGNED_INT && it != poplar::INT)
    throw poputil::poplibs_error("popops::encodeOneHot: indices must be UNSIGNED_INT or INT, got " + it.toString());
  if (on.numElements() != 1 || off.numElements() != 1)
    throw poputil::poplibs_error("popops::encodeOneHot: on and off must have one element each");
  if (on.elementType() != encoded.elementType() || off.elementType() != encoded.elementType())
    throw poputil::poplibs_error("popops::encodeOneHot: on and off must have encoded's type " +
                                 encoded.elementType().toString());
  if (n == 0 || depth == 0) return;
  std::vector<int> cols(depth);
  std::iota(cols.begin(), cols.end(), 0);
  poplar::Tensor col = graph.addConstant<int>(it, {1, depth}, cols, poplar::DebugContext(dc, "columns"));
  poputil::mapTensorLinearly(graph, col);
  const auto full = [&](const poplar::Tensor &t) { return t.reshape({1, 1}).broadcast(n, 0).broadcast(depth, 1); };
  mapWithOutput(graph, pe::Select(pe::_3, pe::_4, pe::Equal(pe::_1, pe::_2)),
                {indices.reshape({n, 1}).broadcast(depth, 1), col.broadcast(n, 0), full(on), full(off)}, encoded,
                prog, poplar::DebugContext(dc, "encodeOneHot"));
}

void encodeOneHot(poplar::Graph &graph, const poplar::Tensor &indices, const poplar::Tensor &encoded,
                  poplar::program::Sequence &prog, const poplar::DebugContext &dc) {
  const poplar::Type t = encoded.elementType();
  poplar::Tensor on = graph.addConstant<float>(t, {}, 1.0f, poplar::DebugContext(dc, "on"));
  poplar::Tensor off = graph.addConstant<float>(t, {}, 0.0f, poplar::DebugContext(dc, "off"));
  graph.setTileMapping(on, 0);
  graph.setTileMapping(off, 0);
  encodeOneHot(graph, indices, encoded, prog, on, off, dc);
}

} // namespace popops
