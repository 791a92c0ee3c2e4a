// ipuxl's PopLibs: popops::histogram from maps and reductions. For each
// level L, c(L) = the number of elements x with !(x < L) (a FLOAT count,
// exact below 2^24); bin 0 = n - c(levels[0]), bin i = c(levels[i-1]) -
// c(levels[i]), the last bin = c(levels.back()).
#include <popops/GatherStatistics.hpp>

#include <popops/ElementWise.hpp>
#include <popops/Reduce.hpp>
#include <poputil/TileMapping.hpp>
#include <poputil/exceptions.hpp>

namespace popops {
namespace pe = popops::expr;

poplar::Tensor histogram(poplar::Graph &graph, const poplar::Tensor &input, const poplar::Tensor &levels,
                         bool absoluteOfInput, poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                         const poplar::OptionFlags &) {
  if (levels.rank() != 1)
    throw poputil::poplibs_error("popops::histogram: levels must be 1-dimensional, got " + levels.shapeToString());
  if (!input.elementType().isFloatingPoint() || levels.elementType() != input.elementType())
    throw poputil::poplibs_error("popops::histogram: input and levels must be of one floating-point type");
  const std::size_t n = input.numElements(), m = levels.numElements();
  poplar::Tensor out = graph.addVariable(poplar::FLOAT, {m + 1}, poplar::DebugContext(dc, "histogram"));
  poputil::mapTensorLinearly(graph, out);
  if (m == 0 || n == 0) {
    popops::mapInPlace(graph, pe::Mul(pe::_1, pe::Const(0.0f)), {out}, prog, poplar::DebugContext(dc, "empty"));
    if (m == 0) popops::mapInPlace(graph, pe::Add(pe::_1, pe::Const(float(n))), {out}, prog, dc);
    return out;
  }
  poplar::Tensor x = input.flatten().reshape({n, 1}).broadcast(m, 1);
  poplar::Tensor l = levels.reshape({1, m}).broadcast(n, 0);
  const poplar::DebugContext atLeast(dc, "atLeast");
  poplar::Tensor ge =
      absoluteOfInput
          ? popops::map(graph, pe::Cast(pe::Not(pe::Lt(pe::Abs(pe::_1), pe::_2)), poplar::FLOAT), {x, l}, prog, atLeast)
          : popops::map(graph, pe::Cast(pe::Not(pe::Lt(pe::_1, pe::_2)), poplar::FLOAT), {x, l}, prog, atLeast);
  poplar::Tensor c = popops::reduce(graph, ge, poplar::FLOAT, {0}, popops::ReduceParams(popops::Operation::ADD), prog,
                                    poplar::DebugContext(dc, "count"));  // [m]
  poplar::Tensor total = graph.addConstant<float>(poplar::FLOAT, {1}, float(n), poplar::DebugContext(dc, "n"));
  graph.setTileMapping(total, 0);
  poplar::Tensor before = poplar::concat(total, c.slice(0, m - 1)), after = c;  // bins 0..m-1: c[i-1] - c[i]
  popops::mapWithOutput(graph, pe::Sub(pe::_1, pe::_2), {before, after}, out.slice(0, m), prog,
                        poplar::DebugContext(dc, "bins"));
  prog.add(poplar::program::Copy(c.slice(m - 1, m), out.slice(m, m + 1)));
  return out;
}

} // namespace popops
