// ipuxl's PopLibs: poplin::matMul. The output is mapped linearly; each run
// of an output row held by one tile is one vertex, reading the row of A
// and the matching columns of B's rows (accumulating in double, stored in
// the output type).
#include "../popops/builtin.hpp"

#include <poplin/MatMul.hpp>
#include <poplin/codelets.hpp>
#include <popops/ElementWise.hpp>
#include <popops/ScaledAdd.hpp>
#include <poputil/TileMapping.hpp>

namespace poplin {
namespace {
using popops::ipuxl::AnyElem;
using popops::ipuxl::load;
using popops::ipuxl::sizeOf;
using popops::ipuxl::store;

struct MatMulPlan {
  int aCode, bCode, outCode;
};

class MatMulRowVertex : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<AnyElem>> a;                       // k elements of a row of A
  poplar::Vector<poplar::Input<poplar::Vector<AnyElem>>> b;       // k rows of B, w columns each
  poplar::Output<poplar::Vector<AnyElem>> out;                    // w elements of the output row
  unsigned long long plan;

  bool compute() {
    const MatMulPlan &p = *popops::ipuxl::planOf<MatMulPlan>(plan);
    std::size_t k = a.size(), w = out.size();
    std::vector<double> acc(w, 0.0);
    const char *ap = reinterpret_cast<const char *>(a.data());
    std::size_t as = sizeOf(p.aCode), bs = sizeOf(p.bCode);
    bool fast = p.aCode == poplar::ipuxl_detail::T_FLOAT && p.bCode == poplar::ipuxl_detail::T_FLOAT;
    for (std::size_t r = 0; r < k; ++r) {
      double av = load(p.aCode, ap + r * as);
      const char *bp = reinterpret_cast<const char *>(b[r].data());
      if (fast) {
        const float *bf = reinterpret_cast<const float *>(bp);
        for (std::size_t j = 0; j < w; ++j) acc[j] += av * bf[j];
      } else {
        for (std::size_t j = 0; j < w; ++j) acc[j] += av * load(p.bCode, bp + j * bs);
      }
    }
    char *op = reinterpret_cast<char *>(out.data());
    for (std::size_t j = 0; j < w; ++j) store(p.outCode, op + j * sizeOf(p.outCode), acc[j]);
    return true;
  }
};

void check2D(const poplar::Tensor &A, const poplar::Tensor &B, const char *op) {
  if (A.rank() != 2 || B.rank() != 2)
    throw poputil::poplibs_error(std::string(op) + ": needs rank-2 operands, got " + A.shapeToString() + " and " +
                                 B.shapeToString());
  if (A.dim(1) != B.dim(0))
    throw poputil::poplibs_error(std::string(op) + ": inner dimensions differ: " + A.shapeToString() + " x " +
                                 B.shapeToString());
}

void buildMatMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B, const poplar::Tensor &C,
                 poplar::program::Sequence &prog, const poplar::DebugContext &dc) {
  popops::ipuxl::requireCodelets(graph, "poplin::ipuxl::MatMulRow", "poplin");
  auto *plan = new MatMulPlan{A.elementType().ipuxlCode(), B.elementType().ipuxlCode(), C.elementType().ipuxlCode()};
  std::size_t k = A.dim(1), n = B.dim(1);
  poplar::ComputeSet cs = graph.addComputeSet(poplar::DebugContext(dc, "matMul"));
  std::vector<poplar::Tensor> bRows;
  for (std::size_t r = 0; r < k; ++r) bRows.push_back(B[r]);
  for (const auto &part : popops::ipuxl::partsByTile(graph, C)) {
    for (const auto &iv : part.intervals) {
      std::size_t at = iv.begin();
      while (at < iv.end()) {
        std::size_t row = at / n, col = at % n;
        std::size_t w = std::min(n - col, iv.end() - at);
        std::vector<poplar::Tensor> cols;
        cols.reserve(k);
        for (std::size_t r = 0; r < k; ++r) cols.push_back(bRows[r].slice(col, col + w));
        auto v = graph.addVertex(cs, "poplin::ipuxl::MatMulRow");
        graph.connect(v["a"], A[row]);
        graph.connect(v["b"], cols);
        if (k == 0) graph.setFieldSize(v["b"], 0);
        graph.connect(v["out"], C[row].slice(col, col + w));
        graph.setInitialValue(v["plan"], popops::ipuxl::keepPlan(plan));
        graph.setTileMapping(v, part.tile);
        // The AMP unit does 8 float (16 half) multiply-accumulates a cycle.
        unsigned macs = A.elementType() == poplar::HALF ? 16 : 8;
        graph.setPerfEstimate(v, 20 + (k * w + macs - 1) / macs);
        at += w;
      }
    }
  }
  prog.add(poplar::program::Execute(cs));
}
} // namespace

namespace ipuxl {
void addConvolutionCodelets(poplar::Graph &graph); // Convolution.cpp
}

void addCodelets(poplar::Graph &graph) {
  ipuxl::addConvolutionCodelets(graph);
  using namespace poplar::ipuxl_detail;
  using V = MatMulRowVertex;
  popops::ipuxl::registerBuiltins(graph, {describe<V>("poplin::ipuxl::MatMulRow",
                                                      {field("a", &V::a), field("b", &V::b), field("out", &V::out),
                                                       field("plan", &V::plan)})});
}

poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::Type &outputType, const poplar::DebugContext &dc,
                      const poplar::OptionFlags &o, PlanningCache *c) {
  if (A.rank() == 3) return matMulGrouped(graph, A, B, prog, outputType, dc, o, c);
  check2D(A, B, "poplin::matMul");
  poplar::Tensor C = graph.addVariable(outputType, {A.dim(0), B.dim(1)}, poplar::DebugContext(dc, "out"));
  poputil::mapTensorLinearly(graph, C);
  buildMatMul(graph, A, B, C, prog, dc);
  return C;
}
poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &o,
                      PlanningCache *c) {
  return matMul(graph, A, B, prog, A.elementType(), dc, o, c);
}
void matMulWithOutput(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B, poplar::Tensor &out,
                      poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &,
                      PlanningCache *) {
  check2D(A, B, "poplin::matMulWithOutput");
  if (out.rank() != 2 || out.dim(0) != A.dim(0) || out.dim(1) != B.dim(1))
    throw poputil::poplibs_error("poplin::matMulWithOutput: the output " + out.shapeToString() + " is not " +
                                 std::to_string(A.dim(0)) + "x" + std::to_string(B.dim(1)));
  buildMatMul(graph, A, B, out, prog, dc);
}
poplar::Tensor matMulGrouped(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                             poplar::program::Sequence &prog, const poplar::Type &outputType,
                             const poplar::DebugContext &dc, const poplar::OptionFlags &o, PlanningCache *c) {
  if (A.rank() != 3 || B.rank() != 3 || A.dim(0) != B.dim(0))
    throw poputil::poplibs_error("poplin::matMulGrouped: needs [g,m,k] x [g,k,n], got " + A.shapeToString() + " and " +
                                 B.shapeToString());
  poplar::Tensor C = graph.addVariable(outputType, {A.dim(0), A.dim(1), B.dim(2)}, poplar::DebugContext(dc, "out"));
  poputil::mapTensorLinearly(graph, C);
  for (std::size_t g = 0; g < A.dim(0); ++g) {
    check2D(A[g], B[g], "poplin::matMulGrouped");
    buildMatMul(graph, A[g], B[g], C[g], prog, dc);
  }
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
