// ipuxl's PopLibs: popops::topK. The values output is mapped in whole rows
// (grain k); one vertex per tile sorts the rows it holds, reading them from
// the input wherever they live.
#include "builtin.hpp"

#include <popops/Cast.hpp>
#include <popops/TopK.hpp>
#include <poputil/TileMapping.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace popops {
namespace {
using ipuxl::AnyElem;

struct TopKPlan {
  int code;
  std::size_t n, k;
  bool largest;
};

class TopKRowsVertex : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<AnyElem>> in;        // the whole input, [rows][n]
  poplar::Output<poplar::Vector<AnyElem>> values;   // the owned rows, [rows here][k]
  poplar::Output<poplar::Vector<unsigned>> indices; // the same rows' indices
  poplar::Vector<unsigned> rows;                    // which rows, in order
  unsigned long long plan;

  bool compute() {
    const TopKPlan &p = *ipuxl::planOf<TopKPlan>(plan);
    const char *src = reinterpret_cast<const char *>(in.data());
    char *dst = reinterpret_cast<char *>(values.data());
    std::size_t sz = ipuxl::sizeOf(p.code);
    std::vector<double> key(p.n);
    std::vector<unsigned> order(p.n);
    for (std::size_t r = 0; r < rows.size(); ++r) {
      const char *row = src + std::size_t(rows[r]) * p.n * sz;
      for (std::size_t i = 0; i < p.n; ++i) key[i] = ipuxl::load(p.code, row + i * sz);
      std::iota(order.begin(), order.end(), 0u);
      auto before = [&](unsigned a, unsigned b) {
        double x = key[a], y = key[b];
        bool xn = std::isnan(x), yn = std::isnan(y);
        // strict orders with NaN above every number
        bool xy = p.largest ? (xn && !yn) || (!xn && !yn && x > y) : (!xn && yn) || (!xn && !yn && x < y);
        bool yx = p.largest ? (yn && !xn) || (!xn && !yn && y > x) : (!yn && xn) || (!xn && !yn && y < x);
        return xy != yx ? xy : a < b;
      };
      std::partial_sort(order.begin(), order.begin() + p.k, order.end(), before);
      for (std::size_t j = 0; j < p.k; ++j) {
        std::memcpy(dst + (r * p.k + j) * sz, row + std::size_t(order[j]) * sz, sz);
        indices[r * p.k + j] = order[j];
      }
    }
    return true;
  }
};

std::pair<poplar::Tensor, poplar::Tensor> build(poplar::Graph &g, poplar::program::Sequence &prog,
                                                const poplar::Tensor &t, const TopKParams &params,
                                                const poplar::DebugContext &dc) {
  const char *fn = "popops::topK";
  ipuxl::requireCodelets(g, "popops::ipuxl::TopKRows", "popops");
  if (t.rank() == 0) throw poputil::poplibs_error(std::string(fn) + ": the input must have rank >= 1");
  std::size_t n = t.dim(t.rank() - 1), k = params.k;
  if (k > n)
    throw poputil::poplibs_error(std::string(fn) + ": k (" + std::to_string(k) + ") is larger than the innermost "
                                 "dimension of " + t.shapeToString());
  if ((params.sortOrder == SortOrder::ASCENDING && params.largest) ||
      (params.sortOrder == SortOrder::DESCENDING && !params.largest))
    throw poputil::poplibs_error(std::string(fn) + ": ipuxl returns the largest values in descending and the "
                                 "smallest in ascending order; the other sort order is not implemented");
  auto shape = t.shape();
  shape.back() = k;
  poplar::Tensor values = g.addVariable(t.elementType(), shape, poplar::DebugContext(dc, "topk/values"));
  poplar::Tensor indices = g.addVariable(poplar::UNSIGNED_INT, shape, poplar::DebugContext(dc, "topk/indices"));
  if (values.numElements() == 0) {
    poputil::mapTensorLinearly(g, values);
    poputil::mapTensorLinearly(g, indices);
    return {values, indices};
  }
  poputil::mapTensorLinearly(g, values, static_cast<unsigned>(k), static_cast<unsigned>(k));
  poputil::mapTensorLinearly(g, indices, static_cast<unsigned>(k), static_cast<unsigned>(k));
  auto *plan = new TopKPlan{t.elementType().ipuxlCode(), n, k, params.largest};
  poplar::Tensor in = t.flatten(), vf = values.flatten(), xf = indices.flatten();
  poplar::ComputeSet cs = g.addComputeSet(poplar::DebugContext(dc, "TopK"));
  for (const auto &part : ipuxl::partsByTile(g, values)) {
    std::vector<unsigned> rows;
    for (const auto &iv : part.intervals)
      for (std::size_t r = iv.begin() / k; r < iv.end() / k; ++r) rows.push_back(static_cast<unsigned>(r));
    if (rows.empty()) continue;
    std::vector<poplar::Tensor> vs, xs;
    for (unsigned r : rows) {
      vs.push_back(vf.slice(r * k, (r + 1) * k));
      xs.push_back(xf.slice(r * k, (r + 1) * k));
    }
    auto v = g.addVertex(cs, "popops::ipuxl::TopKRows");
    g.connect(v["in"], in);
    g.connect(v["values"], poplar::concat(vs));
    g.connect(v["indices"], poplar::concat(xs));
    g.setInitialValue(v["rows"], rows);
    g.setInitialValue(v["plan"], ipuxl::keepPlan(plan));
    g.setTileMapping(v, part.tile);
    // a comparison sort: about n log2(n) compares per row
    double lg = std::log2(static_cast<double>(std::max<std::size_t>(n, 2)));
    g.setPerfEstimate(v, 20 + static_cast<std::uint64_t>(rows.size() * n * lg * 2));
  }
  prog.add(poplar::program::Execute(cs));
  return {values, indices};
}
} // namespace

namespace ipuxl {
std::vector<poplar::ipuxl_detail::VertexTypeInfo> topKVertexTypes() {
  using namespace poplar::ipuxl_detail;
  using V = TopKRowsVertex;
  return {describe<V>("popops::ipuxl::TopKRows", {field("in", &V::in), field("values", &V::values),
                                                  field("indices", &V::indices), field("rows", &V::rows),
                                                  field("plan", &V::plan)})};
}
} // namespace ipuxl

poplar::Tensor createTopKInput(poplar::Graph &graph, const poplar::Type &type, const std::vector<std::size_t> &shape,
                               const TopKParams &, const poplar::DebugContext &dc) {
  poplar::Tensor t = graph.addVariable(type, shape, dc);
  poputil::mapTensorLinearly(graph, t);
  return t;
}

poplar::Tensor topK(poplar::Graph &graph, poplar::program::Sequence &prog, const poplar::Tensor &t,
                    const TopKParams &params, const poplar::DebugContext &dc) {
  return build(graph, prog, t, params, dc).first;
}

std::pair<poplar::Tensor, poplar::Tensor> topKWithPermutation(poplar::Graph &graph, poplar::program::Sequence &prog,
                                                              const poplar::Tensor &t, const TopKParams &params,
                                                              const poplar::DebugContext &dc) {
  return build(graph, prog, t, params, dc);
}

} // namespace popops
