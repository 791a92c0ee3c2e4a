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

std::vector<std::size_t> broadcastShapes(const std::vector<std::vector<std::size_t>> &shapes, const std::string &op) {
  std::size_t rank = 0;
  for (const auto &s : shapes) rank = std::max(rank, s.size());
  std::vector<std::size_t> out(rank, 1);
  for (const auto &s : shapes)
    for (std::size_t k = 0; k < s.size(); ++k) {
      std::size_t d = rank - s.size() + k;
      if (s[k] == out[d] || s[k] == 1) continue;
      if (out[d] == 1) {
        out[d] = s[k];
        continue;
      }
      std::string all;
      for (const auto &x : shapes) {
        all += "{";
        for (std::size_t j = 0; j < x.size(); ++j) all += (j ? "," : "") + std::to_string(x[j]);
        all += "} ";
      }
      throw poputil::poplibs_error(op + ": operand shapes " + all + "do not broadcast");
    }
  return out;
}

poplar::Tensor broadcastTo(const poplar::Tensor &t, const std::vector<std::size_t> &shape) {
  poplar::Tensor r = t;
  while (r.rank() < shape.size()) r = r.expand({0});
  for (unsigned d = 0; d < shape.size(); ++d)
    if (r.dim(d) != shape[d]) r = r.broadcast(static_cast<unsigned>(shape[d]), d);
  return r;
}

} // namespace ipuxl
} // namespace popops
