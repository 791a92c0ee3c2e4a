// ipuxl's PopLibs: popops::reduce. The reduced dimensions are moved last,
// so each output element reduces one contiguous group of the (viewed)
// input. When every group lies on one tile, one vertex per tile of the
// output reduces the groups it holds. Otherwise the reduction has two
// stages, as PopLibs' reduce does (Reduce.hpp, "Reduction operations": the
// input tiles reduce what they hold into partials, float for half/float
// inputs, which are exchanged to the output's tiles and reduced there):
// stage 1 on each input tile makes one partial per output element it holds
// elements of; stage 2 on the output element's tile reduces its partials
// and applies the scale and the update.
#include "builtin.hpp"

#include <algorithm>
#include <limits>
#include <ostream>
#include <popops/Reduce.hpp>
#include <poputil/TileMapping.hpp>

namespace popops {
namespace ipuxl {
namespace {

struct ReducePlan {
  Operation op;
  int inCode, outCode;
  std::size_t group;
  bool update, tensorScale;
  double scale;
  int scaleCode;
};

template <bool Update> class ReduceVertex : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<AnyElem>> in;
  typename std::conditional<Update, poplar::InOut<poplar::Vector<AnyElem>>, poplar::Output<poplar::Vector<AnyElem>>>::type out;
  poplar::Vector<poplar::Input<poplar::Vector<AnyElem>>> scale;
  unsigned long long plan;

  bool compute() {
    const ReducePlan &p = *planOf<ReducePlan>(plan);
    double s = p.scale;
    if (p.tensorScale) s = load(p.scaleCode, reinterpret_cast<const char *>(scale[0].data()));
    std::size_t isz = sizeOf(p.inCode), osz = sizeOf(p.outCode);
    const char *src = reinterpret_cast<const char *>(in.data());
    char *dst = reinterpret_cast<char *>(out.data());
    for (std::size_t o = 0; o < out.size(); ++o) {
      double acc;
      switch (p.op) {
      case Operation::MUL: acc = 1; break;
      case Operation::MAX: acc = -std::numeric_limits<double>::infinity(); break;
      case Operation::MIN: acc = std::numeric_limits<double>::infinity(); break;
      case Operation::LOGICAL_AND: acc = 1; break;
      case Operation::LOG_ADD: acc = -std::numeric_limits<double>::infinity(); break;
      default: acc = 0;
      }
      for (std::size_t k = 0; k < p.group; ++k) {
        double v = load(p.inCode, src + (o * p.group + k) * isz);
        switch (p.op) {
        case Operation::ADD: acc += v; break;
        case Operation::SQUARE_ADD: acc += v * v; break;
        case Operation::MUL: acc *= v; break;
        case Operation::MAX: acc = std::max(acc, v); break;
        case Operation::MIN: acc = std::min(acc, v); break;
        case Operation::LOGICAL_AND: acc = (acc != 0 && v != 0); break;
        case Operation::LOGICAL_OR: acc = (acc != 0 || v != 0); break;
        case Operation::LOG_ADD: {
          double m = std::max(acc, v);
          acc = std::isinf(m) && m < 0 ? m : m + std::log(std::exp(acc - m) + std::exp(v - m));
          break;
        }
        }
      }
      if (p.op == Operation::LOG_ADD) acc += std::log(s);
      else if (p.op != Operation::LOGICAL_AND && p.op != Operation::LOGICAL_OR) acc *= s;
      if (p.update) {
        double prev = load(p.outCode, dst + o * osz);
        switch (p.op) {
        case Operation::MUL: acc *= prev; break;
        case Operation::MAX: acc = std::max(acc, prev); break;
        case Operation::MIN: acc = std::min(acc, prev); break;
        case Operation::LOGICAL_AND: acc = (acc != 0 && prev != 0); break;
        case Operation::LOGICAL_OR: acc = (acc != 0 || prev != 0); break;
        default: acc += prev;
        }
      }
      store(p.outCode, dst + o * osz, acc);
    }
    return true;
  }
};

} // namespace

std::vector<poplar::ipuxl_detail::VertexTypeInfo> reduceVertexTypes() {
  using namespace poplar::ipuxl_detail;
  using R = ReduceVertex<false>;
  using U = ReduceVertex<true>;
  return {describe<R>("popops::ipuxl::Reduce", {field("in", &R::in), field("out", &R::out), field("scale", &R::scale),
                                                field("plan", &R::plan)}),
          describe<U>("popops::ipuxl::ReduceUpdate", {field("in", &U::in), field("out", &U::out),
                                                      field("scale", &U::scale), field("plan", &U::plan)})};
}

namespace {
std::vector<std::size_t> checkDims(const poplar::Tensor &in, const std::vector<std::size_t> &dims) {
  std::vector<std::size_t> d = dims;
  std::sort(d.begin(), d.end());
  d.erase(std::unique(d.begin(), d.end()), d.end());
  for (auto x : d)
    if (x >= in.rank())
      throw poputil::poplibs_error("popops::reduce: dimension " + std::to_string(x) + " out of range for input " +
                                   in.shapeToString());
  return d;
}
std::vector<std::size_t> keptShape(const poplar::Tensor &in, const std::vector<std::size_t> &d) {
  std::vector<std::size_t> s;
  for (unsigned k = 0; k < in.rank(); ++k)
    if (!std::binary_search(d.begin(), d.end(), k)) s.push_back(in.dim(k));
  return s;
}

/// One output element's elements held on one tile (flat intervals of the
/// outN x group view), and how many.
struct OutSegment {
  std::size_t o, size;
  std::vector<poplar::Interval> intervals;
};
struct TileSegments {
  unsigned tile;
  std::vector<OutSegment> outs;  // ascending o
};
std::vector<TileSegments> segmentsByTile(const poplar::Graph &graph, const poplar::Tensor &rows, std::size_t group) {
  std::vector<TileSegments> out;
  if (group == 0) return out;
  auto m = graph.getTileMapping(rows);
  for (unsigned tile = 0; tile < m.size(); ++tile) {
    if (m[tile].empty()) continue;
    auto ivs = m[tile];
    std::sort(ivs.begin(), ivs.end(), [](const poplar::Interval &a, const poplar::Interval &b) { return a.begin() < b.begin(); });
    TileSegments ts{tile, {}};
    for (const auto &iv : ivs) {
      std::size_t b = iv.begin();
      while (b < iv.end()) {
        std::size_t o = b / group, e = std::min<std::size_t>(iv.end(), (o + 1) * group);
        if (ts.outs.empty() || ts.outs.back().o != o) ts.outs.push_back({o, 0, {}});
        ts.outs.back().intervals.push_back(poplar::Interval(b, e));
        ts.outs.back().size += e - b;
        b = e;
      }
    }
    out.push_back(std::move(ts));
  }
  return out;
}

void connectScale(poplar::Graph &graph, const poplar::VertexRef &v, const ReduceParams &params) {
  if (params.useScale)
    graph.connect(v["scale"], std::vector<poplar::Tensor>{params.scale.flatten()});
  else
    graph.setFieldSize(v["scale"], 0);
}

void buildReduce(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Tensor &out,
                 const std::vector<std::size_t> &dimsIn, const ReduceParams &params, std::vector<poplar::ComputeSet> &css,
                 const poplar::DebugContext &dc) {
  const char *type = params.update ? "popops::ipuxl::ReduceUpdate" : "popops::ipuxl::Reduce";
  requireCodelets(graph, type, "popops");
  auto d = checkDims(in, dimsIn);
  auto kept = keptShape(in, d);
  std::size_t outN = 1;
  for (auto k : kept) outN *= k;
  if (out.numElements() != outN)
    throw poputil::poplibs_error("popops::reduce: the output " + out.shapeToString() + " has " +
                                 std::to_string(out.numElements()) + " elements; reducing " + in.shapeToString() +
                                 " leaves " + std::to_string(outN));
  if (params.useScale && params.scale.numElements() != 1)
    throw poputil::poplibs_error("popops::reduce: the scale tensor must have one element");
  std::vector<unsigned> perm;
  for (unsigned k = 0; k < in.rank(); ++k)
    if (!std::binary_search(d.begin(), d.end(), k)) perm.push_back(k);
  for (auto k : d) perm.push_back(static_cast<unsigned>(k));
  std::size_t group = outN ? in.numElements() / outN : 0;
  poplar::Tensor rows = in.dimShuffle(perm).reshape({outN, group});
  const int scaleCode = params.useScale ? params.scale.elementType().ipuxlCode() : poplar::ipuxl_detail::T_FLOAT;
  const int inCode = in.elementType().ipuxlCode(), outCode = out.elementType().ipuxlCode();
  poplar::Tensor flatOut = out.flatten(), flatRows = rows.flatten();
  auto segs = segmentsByTile(graph, rows, group);
  bool split = false;
  if (group > 0) {
    std::vector<unsigned> tilesOf(outN, 0);
    for (const auto &ts : segs)
      for (const auto &sg : ts.outs) split |= ++tilesOf[sg.o] > 1;
  }
  if (!split) {
    auto *plan = new ReducePlan{params.op, inCode, outCode, group, params.update, params.useScale,
                                params.constantScale, scaleCode};
    poplar::ComputeSet cs = graph.addComputeSet(poplar::DebugContext(dc, "reduce"));
    for (const auto &part : partsByTile(graph, out)) {
      std::vector<poplar::Tensor> ins;
      for (const auto &iv : part.intervals) ins.push_back(rows.slice(iv.begin(), iv.end()).flatten());
      auto v = graph.addVertex(cs, type);
      graph.connect(v["in"], ins.size() == 1 ? ins[0] : poplar::concat(ins, 0));
      graph.connect(v["out"], gatherIntervals(flatOut, part.intervals));
      connectScale(graph, v, params);
      graph.setInitialValue(v["plan"], keepPlan(plan));
      graph.setTileMapping(v, part.tile);
      graph.setPerfEstimate(v, 12 + (part.size * group + 1) / 2 + part.size * 2);
    }
    css.push_back(cs);
    return;
  }
  // Stage 1: partials on the input tiles.
  const bool fp = inCode == poplar::ipuxl_detail::T_FLOAT || inCode == poplar::ipuxl_detail::T_HALF;
  poplar::Type partialType = fp ? poplar::FLOAT : in.elementType();
  const int partialCode = partialType.ipuxlCode();
  Operation op1 = params.op, op2 = params.op;
  if (op2 == Operation::SQUARE_ADD) op2 = Operation::ADD;
  std::vector<std::vector<std::pair<unsigned, poplar::Tensor>>> partialsOf(outN);  // (tile, element)
  poplar::ComputeSet cs1 = graph.addComputeSet(poplar::DebugContext(dc, "reduce/stage1"));
  for (const auto &ts : segs) {
    poplar::Tensor partials = graph.addVariable(partialType, {ts.outs.size()}, poplar::DebugContext(dc, "reduce/partials"));
    graph.setTileMapping(partials, ts.tile);
    // One vertex per run of outputs with the same number of elements here.
    std::size_t i = 0;
    while (i < ts.outs.size()) {
      std::size_t j = i, count = ts.outs[i].size;
      std::vector<poplar::Tensor> ins;
      while (j < ts.outs.size() && ts.outs[j].size == count) {
        for (const auto &iv : ts.outs[j].intervals) ins.push_back(flatRows.slice(iv.begin(), iv.end()));
        partialsOf[ts.outs[j].o].push_back({ts.tile, partials[j]});
        ++j;
      }
      auto *plan = new ReducePlan{op1, inCode, partialCode, count, false, false, 1.0, scaleCode};
      auto v = graph.addVertex(cs1, "popops::ipuxl::Reduce");
      graph.connect(v["in"], ins.size() == 1 ? ins[0] : poplar::concat(ins, 0));
      graph.connect(v["out"], partials.slice(i, j));
      graph.setFieldSize(v["scale"], 0);
      graph.setInitialValue(v["plan"], keepPlan(plan));
      graph.setTileMapping(v, ts.tile);
      graph.setPerfEstimate(v, 12 + ((j - i) * count + 1) / 2 + (j - i) * 2);
      i = j;
    }
  }
  css.push_back(cs1);
  // Stage 2: each output element's partials reduced on its tile.
  poplar::ComputeSet cs2 = graph.addComputeSet(poplar::DebugContext(dc, "reduce/stage2"));
  for (const auto &part : partsByTile(graph, out)) {
    std::vector<std::size_t> os;
    for (const auto &iv : part.intervals)
      for (std::size_t o = iv.begin(); o < iv.end(); ++o) os.push_back(o);
    std::size_t i = 0;
    while (i < os.size()) {
      std::size_t j = i, count = partialsOf[os[i]].size();
      std::vector<poplar::Tensor> ins, outs;
      while (j < os.size() && partialsOf[os[j]].size() == count) {
        for (const auto &tp : partialsOf[os[j]]) ins.push_back(tp.second.reshape({1}));
        outs.push_back(flatOut.slice(os[j], os[j] + 1));
        ++j;
      }
      auto *plan = new ReducePlan{op2, partialCode, outCode, count, params.update, params.useScale,
                                  params.constantScale, scaleCode};
      auto v = graph.addVertex(cs2, type);
      graph.connect(v["in"], poplar::concat(ins, 0));
      graph.connect(v["out"], outs.size() == 1 ? outs[0] : poplar::concat(outs, 0));
      connectScale(graph, v, params);
      graph.setInitialValue(v["plan"], keepPlan(plan));
      graph.setTileMapping(v, part.tile);
      graph.setPerfEstimate(v, 12 + ((j - i) * count + 1) / 2 + (j - i) * 2);
      i = j;
    }
  }
  css.push_back(cs2);
}
} // namespace
} // namespace ipuxl

using namespace ipuxl;

std::ostream &operator<<(std::ostream &os, const Operation &op) {
  const char *names[] = {"ADD", "MUL", "MIN", "MAX", "LOGICAL_AND", "LOGICAL_OR", "SQUARE_ADD", "LOG_ADD"};
  return os << names[static_cast<int>(op)];
}

poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Type &outType,
                      const std::vector<std::size_t> &dims, ReduceParams params, std::vector<poplar::ComputeSet> &css,
                      const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  if (params.update) throw poputil::poplibs_error("popops::reduce: update=true needs reduceWithOutput");
  auto kept = keptShape(in, checkDims(in, dims));
  poplar::Tensor out = graph.addVariable(outType, kept, poplar::DebugContext(dc, "reduced"));
  poputil::mapTensorLinearly(graph, out);
  buildReduce(graph, in, out, dims, params, css, dc);
  return out;
}
poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Type &outType,
                      const std::vector<std::size_t> &dims, ReduceParams params, poplar::program::Sequence &prog,
                      const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  std::vector<poplar::ComputeSet> css;
  auto out = reduce(graph, in, outType, dims, params, css, dc, o);
  for (auto &cs : css) prog.add(poplar::program::Execute(cs));
  return out;
}
poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in, const std::vector<std::size_t> &dims,
                      ReduceParams params, poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                      const poplar::OptionFlags &o) {
  return reduce(graph, in, in.elementType(), dims, params, prog, dc, o);
}
void reduceWithOutput(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Tensor &out,
                      const std::vector<std::size_t> &dims, ReduceParams params, std::vector<poplar::ComputeSet> &css,
                      const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  buildReduce(graph, in, out, dims, params, css, dc);
}
void reduceWithOutput(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Tensor &out,
                      const std::vector<std::size_t> &dims, ReduceParams params, poplar::program::Sequence &prog,
                      const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  std::vector<poplar::ComputeSet> css;
  reduceWithOutput(graph, in, out, dims, params, css, dc, o);
  for (auto &cs : css) prog.add(poplar::program::Execute(cs));
}

} // namespace popops
