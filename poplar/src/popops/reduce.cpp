// ipuxl's PopLibs: popops::reduce. The reduced dimensions are moved last,
// so each output element reduces one contiguous group of the (viewed)
// input; one vertex per tile of the output reduces the groups it holds.
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
    if (p.tensorScale) s = load(p.inCode == poplar::ipuxl_detail::T_HALF ? poplar::ipuxl_detail::T_HALF : poplar::ipuxl_detail::T_FLOAT,
                                reinterpret_cast<const char *>(scale[0].data()));
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
  auto *plan = new ReducePlan{params.op, in.elementType().ipuxlCode(), out.elementType().ipuxlCode(), group,
                              params.update, params.useScale, params.constantScale};
  poplar::ComputeSet cs = graph.addComputeSet(poplar::DebugContext(dc, "reduce"));
  poplar::Tensor flatOut = out.flatten();
  for (const auto &part : partsByTile(graph, out)) {
    std::vector<poplar::Tensor> ins;
    for (const auto &iv : part.intervals) ins.push_back(rows.slice(iv.begin(), iv.end()).flatten());
    auto v = graph.addVertex(cs, type);
    graph.connect(v["in"], ins.size() == 1 ? ins[0] : poplar::concat(ins, 0));
    graph.connect(v["out"], gatherIntervals(flatOut, part.intervals));
    if (params.useScale)
      graph.connect(v["scale"], std::vector<poplar::Tensor>{params.scale.flatten()});
    else
      graph.setFieldSize(v["scale"], 0);
    graph.setInitialValue(v["plan"], keepPlan(plan));
    graph.setTileMapping(v, part.tile);
    graph.setPerfEstimate(v, 12 + (part.size * group + 1) / 2 + part.size * 2);
  }
  css.push_back(cs);
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
