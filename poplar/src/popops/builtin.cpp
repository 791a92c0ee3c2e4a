// ipuxl's PopLibs: shared helpers for built-in vertices.
#include "builtin.hpp"

#include "../poplar/impl.hpp"

#include <algorithm>

namespace popops {
namespace ipuxl {

void registerBuiltins(poplar::Graph &graph, const std::vector<poplar::ipuxl_detail::VertexTypeInfo> &types) {
  graph.ipuxlImpl().addVertexTypes(types);
}

void requireCodelets(const poplar::Graph &graph, const char *vertexType, const char *library) {
  if (!graph.hasCodelet(vertexType))
    throw poputil::poplibs_error(std::string(library) + ": the graph has no " + library +
                                 " codelets; call " + library + "::addCodelets(graph) first");
}

std::vector<TilePart> partsByTile(const poplar::Graph &graph, const poplar::Tensor &t) {
  auto m = graph.getTileMapping(t);
  std::vector<TilePart> out;
  for (unsigned tile = 0; tile < m.size(); ++tile) {
    if (m[tile].empty()) continue;
    TilePart p{tile, m[tile], 0};
    for (const auto &i : m[tile]) p.size += i.size();
    out.push_back(std::move(p));
  }
  return out;
}

poplar::Tensor gatherIntervals(const poplar::Tensor &flat, const std::vector<poplar::Interval> &intervals) {
  std::vector<poplar::Tensor> parts;
  for (const auto &i : intervals) parts.push_back(flat.slice(i.begin(), i.end()));
  return parts.size() == 1 ? parts[0] : poplar::concat(parts, 0);
}

} // namespace ipuxl
} // namespace popops
