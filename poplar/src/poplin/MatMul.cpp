// ipuxl's PopLibs: poplin::matMul, laid out by the plan of ipuxl's IPU
// model (cpp/model/matmul_plan.hpp, the planner the Session's model costs
// with): the output's rows, column groups and the contraction split over
// the plan's tiles, one poplin::ConvPartial1x1Out supervisor vertex per
// tile and serial step computing its piece (into the output, or into
// float partials when the contraction is split), then the partials
// reduced on the output's tiles by poplin::ReduceAdd vertices, as poplin
// does. Each output element accumulates in double over its piece of the
// contraction and is stored in the output (or partials) type.
#include "../popops/builtin.hpp"

#include <algorithm>
#include <poplin/MatMul.hpp>
#include <poplin/codelets.hpp>
#include <popops/ElementWise.hpp>
#include <popops/ScaledAdd.hpp>
#include <poputil/TileMapping.hpp>

#include "../../../cpp/model/matmul_plan.hpp"

namespace poplin {
namespace {
using popops::ipuxl::AnyElem;
using popops::ipuxl::load;
using popops::ipuxl::sizeOf;
using popops::ipuxl::store;
using poplar::ipuxl_detail::T_FLOAT;
using poplar::ipuxl_detail::T_HALF;

/// PopLibs' ConvPartial1x1Out fields (lib/poplin/codelets/ConvPartial1x1Out.cpp):
/// in[cg * numInGroups + ig] the rows x input channels of conv group cg and
/// input-channel group ig, weights[(cg * numInGroups + ig) * numOutGroups +
/// og] its input x output channels, out[cg * numOutGroups + og] the rows x
/// output channels of output group og; worklists: per worker context (first row,
/// rows, first row), ipuxl's encoding of the rows each worker takes.
template <int InCode, int OutCode> class ConvPartial1x1OutVertex : public poplar::SupervisorVertex {
public:
  poplar::Vector<poplar::Input<poplar::Vector<AnyElem>>> in;
  poplar::Vector<poplar::Input<poplar::Vector<AnyElem>>> weights;
  poplar::Vector<poplar::Output<poplar::Vector<AnyElem>>> out;
  poplar::Vector<unsigned short> worklists;
  unsigned short numConvGroupsM1, numOutGroupsM1, numInGroups, transformedInStride, outChansPerGroup,
      transformedOutStride, inChansPerGroup;

  bool compute() {
    std::size_t rows = 0;
    for (std::size_t c = 0; c + 2 < worklists.size(); c += 3) rows += worklists[c + 1];
    if (rows == 0) return true;
    const std::size_t ncg = static_cast<std::size_t>(numConvGroupsM1) + 1, nin = numInGroups,
                      nout = static_cast<std::size_t>(numOutGroupsM1) + 1;
    const std::size_t is = sizeOf(InCode), os = sizeOf(OutCode);
    const bool fast = InCode == T_FLOAT;
    for (std::size_t cg = 0; cg < ncg; ++cg)
      for (std::size_t og = 0; og < nout; ++og) {
        const auto &dst = out[cg * nout + og];
        const std::size_t nw = dst.size() / rows;
        std::vector<double> acc(rows * nw, 0.0);
        for (std::size_t ig = 0; ig < nin; ++ig) {
          const auto &x = in[cg * nin + ig];
          const std::size_t kw = x.size() / rows;
          const char *a = reinterpret_cast<const char *>(x.data());
          const char *w = reinterpret_cast<const char *>(weights[(cg * nin + ig) * nout + og].data());
          for (std::size_t r = 0; r < rows; ++r) {
            double *o = acc.data() + r * nw;
            for (std::size_t k = 0; k < kw; ++k) {
              double av = load(InCode, a + (r * kw + k) * is);
              if (fast) {
                const float *bf = reinterpret_cast<const float *>(w) + k * nw;
                for (std::size_t j = 0; j < nw; ++j) o[j] += av * bf[j];
              } else {
                for (std::size_t j = 0; j < nw; ++j) o[j] += av * load(InCode, w + (k * nw + j) * is);
              }
            }
          }
        }
        char *op = reinterpret_cast<char *>(dst.data());
        for (std::size_t e = 0; e < acc.size(); ++e) store(OutCode, op + e * os, acc[e]);
      }
    return true;
  }
};

/// PopLibs' ReduceAdd (lib/poplin/codelets/ReduceAdd.cpp): out = the sum of
/// the numPartials partials (float, or half with half partials), numElems
/// elements each.
template <int OutCode, int PartialsCode> class ReduceAddVertex : public poplar::SupervisorVertex {
public:
  poplar::Vector<poplar::Input<poplar::Vector<AnyElem>>> partials;
  poplar::Output<poplar::Vector<AnyElem>> out;
  unsigned short numPartials, numElems;

  bool compute() {
    const std::size_t n = out.size(), os = sizeOf(OutCode), ps = sizeOf(PartialsCode);
    char *op = reinterpret_cast<char *>(out.data());
    for (std::size_t e = 0; e < n; ++e) {
      double acc = 0;
      for (std::size_t i = 0; i < partials.size(); ++i)
        acc += load(PartialsCode, reinterpret_cast<const char *>(partials[i].data()) + e * ps);
      store(OutCode, op + e * os, acc);
    }
    return true;
  }
};

const char *typeName(int code) { return code == T_HALF ? "half" : "float"; }
std::string convPartialName(int in, int out) {
  return std::string("poplin::ConvPartial1x1Out<") + typeName(in) + "," + typeName(out) + ">";
}
std::string reduceAddName(int out, int partials) {
  return std::string("poplin::ReduceAdd<") + typeName(out) + "," + typeName(partials) + ">";
}

void check2D(const poplar::Tensor &A, const poplar::Tensor &B, const char *op) {
  if (A.rank() != 2 || B.rank() != 2)
    throw poputil::poplibs_error(std::string(op) + ": needs rank-2 operands, got " + A.shapeToString() + " and " +
                                 B.shapeToString());
  if (A.dim(1) != B.dim(0))
    throw poputil::poplibs_error(std::string(op) + ": inner dimensions differ: " + A.shapeToString() + " x " +
                                 B.shapeToString());
  int a = A.elementType().ipuxlCode(), b = B.elementType().ipuxlCode();
  if ((a != T_FLOAT && a != T_HALF) || a != b)
    throw poputil::poplibs_error(std::string(op) + ": needs float or half operands of one type, got " +
                                 A.elementType().toString() + " and " + B.elementType().toString());
}

const ipuxl::model::Target &figures() {
  static const ipuxl::model::Target t{};
  return t;
}

/// The plan's creator layout (the Session model's `spread`, poputil's
/// linear mapping): ceil(n / tiles) consecutive elements a tile from `first`.
bool hasPlanLayout(const poplar::Graph &graph, const poplar::Tensor &x, unsigned first, std::int64_t tiles) {
  std::size_t n = x.numElements();
  if (n == 0) return true;
  const std::size_t ept = static_cast<std::size_t>(
      ipuxl::model::spread_grain(static_cast<std::int64_t>(n), tiles));
  auto m = graph.getTileMapping(x, false);
  std::size_t seen = 0;
  for (unsigned t = 0; t < m.size(); ++t)
    for (const auto &iv : m[t]) {
      if (iv.size() == 0) continue;
      if (t < first || iv.begin() / ept != (iv.end() - 1) / ept || t - first != iv.begin() / ept) return false;
      seen += iv.size();
    }
  return seen == n;
}

unsigned firstTile(const poplar::Graph &graph, const poplar::Tensor &t) {
  auto m = graph.getTileMapping(t, false);
  for (unsigned i = 0; i < m.size(); ++i)
    for (const auto &iv : m[i])
      if (iv.size()) return i;
  return 0;
}

/// The option partialsType ("float", the default, or "half"): whether a
/// product of half operands plans and stores its partial sums in half.
bool halfPartials(const poplar::OptionFlags &o) {
  bool half = false;
  for (const auto &kv : o)
    if (kv.first == "partialsType") {
      if (kv.second != "half" && kv.second != "float")
        throw poplar::invalid_option("poplin::matMul: partialsType must be 'half' or 'float', got '" +
                                     kv.second + "'");
      half = kv.second == "half";
    }
  return half;
}

double availableMemoryProportion(const poplar::OptionFlags &o) {
  double amp = figures().available_memory_proportion;
  for (const auto &kv : o)
    if (kv.first == "availableMemoryProportion") amp = std::stod(kv.second);
  return amp;
}

/// The plan of G groups of [M,K] x [K,N] (A [G,M,K], B [G,K,N]; grouped:
/// each group its own B, PopART's batched MatMul) on the graph's tiles from
/// `first`: an operand counts as laid out by the plan (the model's resident
/// operand) when its mapping is the plan's creator layout.
ipuxl::model::Plan planOf(const poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B, bool grouped,
                          unsigned first, double amp, bool halfPartials, ipuxl::model::MatMulProblem &q) {
  q.G = static_cast<std::int64_t>(A.dim(0));
  q.grouped = grouped;
  q.M = static_cast<std::int64_t>(A.dim(1));
  q.K = static_cast<std::int64_t>(A.dim(2));
  q.N = static_cast<std::int64_t>(B.dim(2));
  q.half = A.elementType().ipuxlCode() == T_HALF;
  q.half_partials = q.half && halfPartials;  // float operands keep float partials
  q.es = static_cast<std::int64_t>(A.elementType().ipuxlSize());
  q.tiles = std::max<std::int64_t>(1, static_cast<std::int64_t>(graph.getTarget().getNumTiles()) - first);
  q.amp = amp;
  ipuxl::model::Plan p;
  for (int c = 0; c < 4; ++c) {
    q.a_resident = c < 2, q.b_resident = c % 2 == 0;
    p = ipuxl::model::plan_matmul(figures(), q);
    if (q.a_resident && !hasPlanLayout(graph, A, first, p.tiles())) continue;
    if (q.b_resident && !hasPlanLayout(graph, B, first, p.tiles())) continue;
    return p;
  }
  return p;
}

/// The rows [r0,r1) x columns [c0,c1) of group g of a [G,rows,cols] tensor, flattened.
poplar::Tensor block(const poplar::Tensor &x, std::size_t g, std::size_t r0, std::size_t r1, std::size_t c0,
                     std::size_t c1) {
  return x[g].slice({r0, c0}, {r1, c1}).flatten();
}

/// The vertices of plan p for A [G,M,K] x B [G,K,N] -> C [G,M,N] (B[0] for
/// every group when not grouped, the G x M rows then split as one).
void buildMatMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B, const poplar::Tensor &C,
                 const ipuxl::model::MatMulProblem &q, const ipuxl::model::Plan &p, unsigned first,
                 poplar::program::Sequence &prog, const poplar::DebugContext &dc) {
  using ipuxl::model::plan_detail::cdiv;
  const auto &T = figures();
  const int inCode = A.elementType().ipuxlCode(), outCode = C.elementType().ipuxlCode();
  const bool split = p.pk > 1;
  const int partCode = split ? (q.half_partials ? T_HALF : T_FLOAT) : outCode;
  popops::ipuxl::requireCodelets(graph, convPartialName(inCode, partCode).c_str(), "poplin");
  const ipuxl::model::PlanPiece s = ipuxl::model::plan_piece(T, q, p);
  const std::size_t G = A.dim(0), M = A.dim(1), K = A.dim(2), N = B.dim(2);
  // Not grouped: the G x M rows are one [G*M, K] operand.
  const poplar::Tensor A3 = q.grouped ? A : A.reshape({1, G * M, K});
  const poplar::Tensor C3 = q.grouped ? C : C.reshape({1, G * M, N});
  const poplar::Tensor B3 = q.grouped ? B : B.slice(0, 1, 0);
  const std::size_t G3 = A3.dim(0), M3 = A3.dim(1);
  const std::int64_t outG = ipuxl::model::amp_out_group(T, q.half, q.half_partials), inG = ipuxl::model::amp_in_group(T, q.half);
  const std::int64_t ng = cdiv(q.N, outG), groupsPerCol = cdiv(ng, p.pn);
  const unsigned workers = graph.getTarget().getNumWorkerContexts();
  poplar::Tensor partials;
  if (split)
    partials = graph.addVariable(q.half_partials ? poplar::HALF : poplar::FLOAT,
                                 {static_cast<std::size_t>(p.pk), G3, M3, N},
                                 poplar::DebugContext(dc, "partials"));
  for (std::int64_t st = 0; st < p.ps; ++st) {
    poplar::ComputeSet cs = graph.addComputeSet(poplar::DebugContext(dc, split ? "matMul/partials" : "matMul"));
    std::size_t stepC0 = N, stepC1 = 0;
    for (std::int64_t ig = 0; ig < p.pg; ++ig)
      for (std::int64_t im = 0; im < p.pm; ++im)
        for (std::int64_t ik = 0; ik < p.pk; ++ik)
          for (std::int64_t in = 0; in < p.pn; ++in) {
            const unsigned tile = first + static_cast<unsigned>(((ig * p.pm + im) * p.pk + ik) * p.pn + in);
            const std::size_t q0 = std::min<std::size_t>(G3, ig * s.g), q1 = std::min<std::size_t>(G3, (ig + 1) * s.g);
            const std::size_t r0 = std::min<std::size_t>(M3, im * s.m), r1 = std::min<std::size_t>(M3, (im + 1) * s.m);
            const std::int64_t g0 = in * groupsPerCol + st * s.out_groups;
            const std::int64_t g1 = std::min({ng, (in + 1) * groupsPerCol, g0 + s.out_groups});
            const std::size_t c0 = std::min<std::size_t>(N, g0 * outG),
                              c1 = std::min<std::size_t>(N, std::max(g0, g1) * outG);
            const std::size_t k0 = std::min<std::size_t>(K, ik * s.k), k1 = std::min<std::size_t>(K, (ik + 1) * s.k);
            if (q0 >= q1 || r0 >= r1 || c0 >= c1) continue;
            stepC0 = std::min(stepC0, c0), stepC1 = std::max(stepC1, c1);
            poplar::Tensor dst = split ? partials[ik] : C3;
            if (split) graph.setTileMapping(dst.slice({q0, r0, c0}, {q1, r1, c1}), tile);
            std::vector<poplar::Tensor> ins, ws, outs;
            for (std::size_t g = q0; g < q1; ++g) {
              const std::size_t bg = q.grouped ? g : 0;
              for (std::size_t ka = k0; ka < k1; ka += inG)
                ins.push_back(block(A3, g, r0, r1, ka, std::min<std::size_t>(k1, ka + inG)));
              for (std::size_t ka = k0; ka < k1; ka += inG)
                for (std::size_t ca = c0; ca < c1; ca += outG)
                  ws.push_back(block(B3, bg, ka, std::min<std::size_t>(k1, ka + inG), ca, std::min<std::size_t>(c1, ca + outG)));
              for (std::size_t ca = c0; ca < c1; ca += outG)
                outs.push_back(block(dst, g, r0, r1, ca, std::min<std::size_t>(c1, ca + outG)));
            }
            const std::size_t ncg = q1 - q0, nin = ins.size() / ncg, nout = outs.size() / ncg;
            auto v = graph.addVertex(cs, convPartialName(inCode, partCode));
            graph.connect(v["in"], ins);
            graph.connect(v["weights"], ws);
            graph.connect(v["out"], outs);
            if (ins.empty()) graph.setFieldSize(v["in"], 0), graph.setFieldSize(v["weights"], 0);
            std::vector<unsigned short> wl;
            const std::size_t rows = r1 - r0, per = (rows + workers - 1) / workers;
            for (unsigned c = 0; c < workers; ++c) {
              std::size_t b = std::min(rows, c * per), e = std::min(rows, (c + 1) * per);
              wl.push_back(static_cast<unsigned short>(b));
              wl.push_back(static_cast<unsigned short>(e - b));
              wl.push_back(static_cast<unsigned short>(b));
            }
            graph.setInitialValue(v["worklists"], wl);
            graph.setInitialValue(v["numConvGroupsM1"], static_cast<unsigned short>(ncg - 1));
            graph.setInitialValue(v["numOutGroupsM1"], static_cast<unsigned short>(nout - 1));
            graph.setInitialValue(v["numInGroups"], static_cast<unsigned short>(nin));
            graph.setInitialValue(v["transformedInStride"], static_cast<unsigned short>(1));
            graph.setInitialValue(v["outChansPerGroup"], static_cast<unsigned short>(outG));
            graph.setInitialValue(v["transformedOutStride"], static_cast<unsigned short>(1));
            graph.setInitialValue(v["inChansPerGroup"], static_cast<unsigned short>(inG));
            graph.setTileMapping(v, tile);
            // The supervisor's cycles on each worker context (profile.cpp counts
            // a supervisor vertex on all of them).
            const std::int64_t passes = static_cast<std::int64_t>(ncg * nout * nin);
            graph.setPerfEstimate(v, static_cast<std::uint64_t>(cdiv(
                                         ipuxl::model::conv_partial_cycles(T, q.half, q.half_partials, q.es, passes, rows), workers)));
          }
    prog.add(poplar::program::Execute(cs));
    if (!split || stepC0 >= stepC1) continue;
    // The partials of this step's columns reduced on the output's tiles.
    popops::ipuxl::requireCodelets(graph, reduceAddName(outCode, partCode).c_str(), "poplin");
    poplar::ComputeSet rcs = graph.addComputeSet(poplar::DebugContext(dc, "matMul/reduce"));
    poplar::Tensor cFlat = C3.slice(stepC0, stepC1, 2).flatten();
    std::vector<poplar::Tensor> pStep;
    for (std::int64_t ik = 0; ik < p.pk; ++ik) pStep.push_back(partials[ik].slice(stepC0, stepC1, 2).flatten());
    for (const auto &part : popops::ipuxl::partsByTile(graph, cFlat)) {
      std::vector<poplar::Tensor> ps;
      for (const auto &x : pStep) ps.push_back(popops::ipuxl::gatherIntervals(x, part.intervals));
      auto v = graph.addVertex(rcs, reduceAddName(outCode, partCode));
      graph.connect(v["partials"], ps);
      graph.connect(v["out"], popops::ipuxl::gatherIntervals(cFlat, part.intervals));
      graph.setInitialValue(v["numPartials"], static_cast<unsigned short>(p.pk));
      graph.setInitialValue(v["numElems"], static_cast<unsigned short>(std::min<std::size_t>(part.size, 65535)));
      graph.setTileMapping(v, part.tile);
      graph.setPerfEstimate(v, static_cast<std::uint64_t>(cdiv(
                                   ipuxl::model::reduce_add_cycles(T, static_cast<std::int64_t>(part.size), p.pk,
                                                                   ipuxl::model::partial_bytes(q)), workers)));
    }
    prog.add(poplar::program::Execute(rcs));
  }
}

/// C laid out as the plan creates it (the model's `spread`).
void mapAsPlan(poplar::Graph &graph, const poplar::Tensor &C, unsigned first, std::int64_t tiles) {
  std::size_t n = C.numElements();
  if (n == 0) return;
  const std::size_t ept = static_cast<std::size_t>(
      ::ipuxl::model::spread_grain(static_cast<std::int64_t>(n), tiles));
  poplar::Tensor f = C.flatten();
  for (std::size_t b = 0, i = 0; b < n; b += ept, ++i) graph.setTileMapping(f.slice(b, std::min(n, b + ept)), first + i);
}

/// A [G,M,K] x B [G,K,N] into C [G,M,N]; C already mapped (`mapped`: the
/// plan starts on its first tile) or laid out here as the plan creates it.
void matMulInto(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B, const poplar::Tensor &C,
                bool grouped, bool mapped, poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                const poplar::OptionFlags &o) {
  unsigned first = mapped ? firstTile(graph, C) : 0;
  ipuxl::model::MatMulProblem q;
  ipuxl::model::Plan p = planOf(graph, A, B, grouped, first, availableMemoryProportion(o), halfPartials(o), q);
  if (!mapped) mapAsPlan(graph, C, first, p.tiles());
  buildMatMul(graph, A, B, C, q, p, first, prog, dc);
}
} // namespace

namespace ipuxl {
void addConvolutionCodelets(poplar::Graph &graph); // Convolution.cpp
}

template <int In, int Out> poplar::ipuxl_detail::VertexTypeInfo convPartialType() {
  using namespace poplar::ipuxl_detail;
  using V = ConvPartial1x1OutVertex<In, Out>;
  static const std::string name = convPartialName(In, Out);
  VertexTypeInfo t = describe<V>(name.c_str(), {field("in", &V::in), field("weights", &V::weights), field("out", &V::out),
                                     field("worklists", &V::worklists), field("numConvGroupsM1", &V::numConvGroupsM1),
                                     field("numOutGroupsM1", &V::numOutGroupsM1), field("numInGroups", &V::numInGroups),
                                     field("transformedInStride", &V::transformedInStride),
                                     field("outChansPerGroup", &V::outChansPerGroup),
                                     field("transformedOutStride", &V::transformedOutStride),
                                     field("inChansPerGroup", &V::inChansPerGroup)});
  // The state the IPU model charges for the vertex (matmul_plan.hpp): its
  // `in` (field 0) and `out` (field 2) edges.
  t.stateBytes = [](const std::vector<std::size_t> &e) {
    return static_cast<std::uint64_t>(::ipuxl::model::conv_partial_state(
        figures(), static_cast<std::int64_t>(e.at(0)), static_cast<std::int64_t>(e.at(2))));
  };
  t.codeBytes = static_cast<std::uint64_t>(::ipuxl::model::conv_partial_code(In == T_HALF));
  return t;
}
template <int Out, int Partials> poplar::ipuxl_detail::VertexTypeInfo reduceAddType() {
  using namespace poplar::ipuxl_detail;
  using V = ReduceAddVertex<Out, Partials>;
  static const std::string name = reduceAddName(Out, Partials);
  VertexTypeInfo t = describe<V>(name.c_str(), {field("partials", &V::partials), field("out", &V::out),
                                                 field("numPartials", &V::numPartials), field("numElems", &V::numElems)});
  t.stateBytes = [](const std::vector<std::size_t> &) {
    return static_cast<std::uint64_t>(::ipuxl::model::reduce_add_state());
  };
  t.codeBytes = static_cast<std::uint64_t>(::ipuxl::model::reduce_add_code());
  return t;
}

void addCodelets(poplar::Graph &graph) {
  ipuxl::addConvolutionCodelets(graph);
  popops::ipuxl::registerBuiltins(graph, {convPartialType<T_FLOAT, T_FLOAT>(), convPartialType<T_HALF, T_FLOAT>(),
                                          convPartialType<T_HALF, T_HALF>(), convPartialType<T_FLOAT, T_HALF>(),
                                          reduceAddType<T_FLOAT, T_FLOAT>(), reduceAddType<T_HALF, T_FLOAT>(),
                                          reduceAddType<T_HALF, T_HALF>(), reduceAddType<T_FLOAT, T_HALF>()});
}

poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::Type &outputType, const poplar::DebugContext &dc,
                      const poplar::OptionFlags &o, PlanningCache *c) {
  if (A.rank() == 3) return matMulGrouped(graph, A, B, prog, outputType, dc, o, c);
  check2D(A, B, "poplin::matMul");
  poplar::Tensor C = graph.addVariable(outputType, {A.dim(0), B.dim(1)}, poplar::DebugContext(dc, "out"));
  matMulInto(graph, A.expand({0}), B.expand({0}), C.expand({0}), false, false, prog, dc, o);
  return C;
}
poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &o,
                      PlanningCache *c) {
  return matMul(graph, A, B, prog, A.elementType(), dc, o, c);
}
void matMulWithOutput(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B, poplar::Tensor &out,
                      poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &o,
                      PlanningCache *) {
  check2D(A, B, "poplin::matMulWithOutput");
  if (out.rank() != 2 || out.dim(0) != A.dim(0) || out.dim(1) != B.dim(1))
    throw poputil::poplibs_error("poplin::matMulWithOutput: the output " + out.shapeToString() + " is not " +
                                 std::to_string(A.dim(0)) + "x" + std::to_string(B.dim(1)));
  matMulInto(graph, A.expand({0}), B.expand({0}), out.expand({0}), false, true, prog, dc, o);
}
poplar::Tensor matMulGrouped(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                             poplar::program::Sequence &prog, const poplar::Type &outputType,
                             const poplar::DebugContext &dc, const poplar::OptionFlags &o, PlanningCache *c) {
  if (A.rank() != 3 || B.rank() != 3 || A.dim(0) != B.dim(0))
    throw poputil::poplibs_error("poplin::matMulGrouped: needs [g,m,k] x [g,k,n], got " + A.shapeToString() + " and " +
                                 B.shapeToString());
  for (std::size_t g = 0; g < A.dim(0); ++g) check2D(A[g], B[g], "poplin::matMulGrouped");
  poplar::Tensor C = graph.addVariable(outputType, {A.dim(0), A.dim(1), B.dim(2)}, poplar::DebugContext(dc, "out"));
  matMulInto(graph, A, B, C, true, false, prog, dc, o);
  (void)o;
  (void)c;
  return C;
}
void matMulAcc(poplar::Graph &graph, const poplar::Tensor &C, float k, const poplar::Tensor &A, const poplar::Tensor &B,
               poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &o,
               PlanningCache *c) {
  poplar::Tensor p = matMul(graph, A, B, prog, C.elementType(), dc, o, c);
  popops::scaledAddTo(graph, C, p, k, prog, dc);
}

namespace {
poplar::Tensor linear(poplar::Graph &g, const poplar::Type &t, const std::vector<std::size_t> &shape,
                      const poplar::DebugContext &dc) {
  poplar::Tensor x = g.addVariable(t, shape, dc);
  poputil::mapTensorLinearly(g, x);
  return x;
}
} // namespace
poplar::Tensor createMatMulInputLHS(poplar::Graph &g, const poplar::Type &t, const std::vector<std::size_t> &a,
                                    const std::vector<std::size_t> &, const poplar::DebugContext &dc,
                                    const poplar::OptionFlags &, PlanningCache *) {
  return linear(g, t, a, dc);
}
poplar::Tensor createMatMulInputLHS(poplar::Graph &g, const poplar::Type &t, const poplar::Type &,
                                    const std::vector<std::size_t> &a, const std::vector<std::size_t> &,
                                    const poplar::DebugContext &dc, const poplar::OptionFlags &, PlanningCache *) {
  return linear(g, t, a, dc);
}
poplar::Tensor createMatMulInputRHS(poplar::Graph &g, const poplar::Type &t, const std::vector<std::size_t> &,
                                    const std::vector<std::size_t> &b, const poplar::DebugContext &dc,
                                    const poplar::OptionFlags &, PlanningCache *) {
  return linear(g, t, b, dc);
}
poplar::Tensor createMatMulInputRHS(poplar::Graph &g, const poplar::Type &t, const poplar::Type &,
                                    const std::vector<std::size_t> &, const std::vector<std::size_t> &b,
                                    const poplar::DebugContext &dc, const poplar::OptionFlags &, PlanningCache *) {
  return linear(g, t, b, dc);
}

} // namespace poplin
