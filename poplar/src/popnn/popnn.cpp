// ipuxl's PopLibs: popnn non-linearities, softmax, log-softmax, losses
// and accuracy. Element-wise non-linearities are popops maps; the rest are
// built-in vertices, one per row of the innermost dimension (on the tile
// that holds the row's first element).
#include "../popops/builtin.hpp"

#include <algorithm>
#include <limits>
#include <popnn/LogSoftmax.hpp>
#include <popnn/Loss.hpp>
#include <popnn/NonLinearity.hpp>
#include <popnn/codelets.hpp>
#include <popops/ElementWise.hpp>
#include <popops/Reduce.hpp>

namespace popnn {
namespace {
using popops::ipuxl::AnyElem;
using popops::ipuxl::load;
using popops::ipuxl::planOf;
using popops::ipuxl::sizeOf;
using popops::ipuxl::store;

struct RowPlan {
  int inCode, outCode;
  bool log;
};

class SoftmaxRowVertex : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<AnyElem>> in;
  poplar::Output<poplar::Vector<AnyElem>> out;
  unsigned long long plan;
  bool compute() {
    const RowPlan &p = *planOf<RowPlan>(plan);
    std::size_t n = in.size();
    std::vector<double> x(n);
    for (std::size_t i = 0; i < n; ++i) x[i] = load(p.inCode, reinterpret_cast<const char *>(in.data()) + i * sizeOf(p.inCode));
    double m = n ? *std::max_element(x.begin(), x.end()) : 0, s = 0;
    for (auto v : x) s += std::exp(v - m);
    for (std::size_t i = 0; i < n; ++i) {
      double y = p.log ? (x[i] - m) - std::log(s) : std::exp(x[i] - m) / s;
      store(p.outCode, reinterpret_cast<char *>(out.data()) + i * sizeOf(p.outCode), y);
    }
    return true;
  }
};

struct LossPlan {
  LossType type;
  int probCode, labelCode, lossCode, deltaCode;
  std::size_t classes;
};

class LossVertex : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<AnyElem>> probs;  // batch x classes
  poplar::Input<poplar::Vector<AnyElem>> labels; // batch
  poplar::Output<poplar::Vector<AnyElem>> loss;  // batch
  poplar::Output<poplar::Vector<AnyElem>> deltas;// batch x classes
  unsigned long long plan;
  bool compute() {
    const LossPlan &p = *planOf<LossPlan>(plan);
    std::size_t b = labels.size();
    for (std::size_t r = 0; r < b; ++r) {
      long long label = static_cast<long long>(load(p.labelCode, reinterpret_cast<const char *>(labels.data()) + r * sizeOf(p.labelCode)));
      double l = 0;
      for (std::size_t c = 0; c < p.classes; ++c) {
        double pr = load(p.probCode, reinterpret_cast<const char *>(probs.data()) + (r * p.classes + c) * sizeOf(p.probCode));
        double t = static_cast<long long>(c) == label ? 1.0 : 0.0;
        double d = pr - t;
        if (p.type == SUM_SQUARED_LOSS) l += 0.5 * d * d;
        else if (t == 1.0) l = -std::log(std::max(pr, std::numeric_limits<double>::min()));
        store(p.deltaCode, reinterpret_cast<char *>(deltas.data()) + (r * p.classes + c) * sizeOf(p.deltaCode), d);
      }
      store(p.lossCode, reinterpret_cast<char *>(loss.data()) + r * sizeOf(p.lossCode), l);
    }
    return true;
  }
};

struct ArgPlan {
  int probCode, labelCode, outCode;
  std::size_t classes;
};

/// Adds the number of rows whose largest value is at the label to numCorrect.
class AccuracyVertex : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<AnyElem>> probs;
  poplar::Input<poplar::Vector<AnyElem>> labels;
  poplar::InOut<poplar::Vector<AnyElem>> numCorrect;
  unsigned long long plan;
  bool compute() {
    const ArgPlan &p = *planOf<ArgPlan>(plan);
    std::size_t b = labels.size();
    double correct = load(p.outCode, reinterpret_cast<const char *>(numCorrect.data()));
    for (std::size_t r = 0; r < b; ++r) {
      std::size_t best = 0;
      double bv = -std::numeric_limits<double>::infinity();
      for (std::size_t c = 0; c < p.classes; ++c) {
        double v = load(p.probCode, reinterpret_cast<const char *>(probs.data()) + (r * p.classes + c) * sizeOf(p.probCode));
        if (v > bv) { bv = v; best = c; }
      }
      double label = load(p.labelCode, reinterpret_cast<const char *>(labels.data()) + r * sizeOf(p.labelCode));
      if (static_cast<double>(best) == label) correct += 1;
    }
    store(p.outCode, reinterpret_cast<char *>(numCorrect.data()), correct);
    return true;
  }
};

/// The index of each row's largest (Min: smallest) element, the first one
/// on ties.
template <bool Min> class ArgExtremeVertex : public poplar::Vertex {
public:
  poplar::Input<poplar::Vector<AnyElem>> in;
  poplar::Output<poplar::Vector<AnyElem>> out;
  unsigned long long plan;
  bool compute() {
    const ArgPlan &p = *planOf<ArgPlan>(plan);
    std::size_t rows = out.size();
    for (std::size_t r = 0; r < rows; ++r) {
      std::size_t best = 0;
      double bv = Min ? std::numeric_limits<double>::infinity() : -std::numeric_limits<double>::infinity();
      for (std::size_t c = 0; c < p.classes; ++c) {
        double v = load(p.probCode, reinterpret_cast<const char *>(in.data()) + (r * p.classes + c) * sizeOf(p.probCode));
        if (Min ? v < bv : v > bv) { bv = v; best = c; }
      }
      store(p.outCode, reinterpret_cast<char *>(out.data()) + r * sizeOf(p.outCode), static_cast<double>(best));
    }
    return true;
  }
};

unsigned firstTile(const poplar::Graph &g, const poplar::Tensor &t) {
  auto m = g.getTileMapping(t);
  for (unsigned i = 0; i < m.size(); ++i)
    if (!m[i].empty()) return i;
  return 0;
}

void softmaxRows(poplar::Graph &g, const poplar::Tensor &in, const poplar::Tensor &out, bool log,
                 poplar::program::Sequence &prog, const poplar::DebugContext &dc) {
  popops::ipuxl::requireCodelets(g, "popnn::ipuxl::SoftmaxRow", "popnn");
  if (in.rank() == 0) throw poputil::poplibs_error("popnn softmax: needs a tensor of rank 1 or more");
  auto *plan = new RowPlan{in.elementType().ipuxlCode(), out.elementType().ipuxlCode(), log};
  std::size_t n = in.dim(in.rank() - 1), rows = n ? in.numElements() / n : 0;
  poplar::Tensor ri = in.reshape({rows, n}), ro = out.reshape({rows, n});
  poplar::ComputeSet cs = g.addComputeSet(poplar::DebugContext(dc, log ? "logSoftmax" : "softmax"));
  for (std::size_t r = 0; r < rows; ++r) {
    auto v = g.addVertex(cs, "popnn::ipuxl::SoftmaxRow");
    g.connect(v["in"], ri[r]);
    g.connect(v["out"], ro[r]);
    g.setInitialValue(v["plan"], popops::ipuxl::keepPlan(plan));
    g.setTileMapping(v, firstTile(g, ro[r]));
    g.setPerfEstimate(v, 30 + 12 * n);
  }
  prog.add(poplar::program::Execute(cs));
}

void checkLossShapes(const poplar::Tensor &probs, const poplar::Tensor &expected, const poplar::Tensor &loss,
                     const poplar::Tensor &deltas) {
  if (probs.rank() != 2)
    throw poputil::poplibs_error("popnn::calcLoss: modelOutputs must be [batch, classes], got " + probs.shapeToString());
  std::size_t b = probs.dim(0);
  if (expected.numElements() != b || loss.numElements() != b)
    throw poputil::poplibs_error("popnn::calcLoss: expected and loss need " + std::to_string(b) + " elements (one per row)");
  if (deltas.shape() != probs.shape())
    throw poputil::poplibs_error("popnn::calcLoss: deltas " + deltas.shapeToString() + " must have the shape of modelOutputs " +
                                 probs.shapeToString());
  if (expected.elementType().isFloatingPoint())
    throw poputil::poplibs_error("popnn::calcLoss: expected must hold class indices of an integral type");
}
} // namespace

namespace pooling {
namespace ipuxl {
void addPoolingCodelets(poplar::Graph &graph); // Pooling.cpp
}
} // namespace pooling

void addCodelets(poplar::Graph &graph) {
  pooling::ipuxl::addPoolingCodelets(graph);
  using namespace poplar::ipuxl_detail;
  using S = SoftmaxRowVertex;
  using L = LossVertex;
  using A = AccuracyVertex;
  using M = ArgExtremeVertex<false>;
  using N = ArgExtremeVertex<true>;
  popops::ipuxl::registerBuiltins(
      graph, {describe<S>("popnn::ipuxl::SoftmaxRow", {field("in", &S::in), field("out", &S::out), field("plan", &S::plan)}),
              describe<L>("popnn::ipuxl::Loss", {field("probs", &L::probs), field("labels", &L::labels),
                                                 field("loss", &L::loss), field("deltas", &L::deltas),
                                                 field("plan", &L::plan)}),
              describe<A>("popnn::ipuxl::Accuracy", {field("probs", &A::probs), field("labels", &A::labels),
                                                     field("numCorrect", &A::numCorrect), field("plan", &A::plan)}),
              describe<M>("popnn::ipuxl::ArgMax", {field("in", &M::in), field("out", &M::out), field("plan", &M::plan)}),
              describe<N>("popnn::ipuxl::ArgMin", {field("in", &N::in), field("out", &N::out), field("plan", &N::plan)})});
}

namespace pe = popops::expr;

void nonLinearityInPlace(poplar::Graph &g, NonLinearityType type, poplar::Tensor t, poplar::program::Sequence &prog,
                         const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  switch (type) {
  case NonLinearityType::SIGMOID: popops::mapInPlace(g, pe::Sigmoid(pe::_1), {t}, prog, dc); return;
  case NonLinearityType::HARD_SIGMOID:
    popops::mapInPlace(g, pe::Clamp(pe::Const(0.2f) * pe::_1 + pe::Const(0.5f), pe::Const(0.0f), pe::Const(1.0f)), {t}, prog, dc);
    return;
  case NonLinearityType::RELU: popops::mapInPlace(g, pe::Relu(pe::_1), {t}, prog, dc); return;
  case NonLinearityType::TANH: popops::mapInPlace(g, pe::Tanh(pe::_1), {t}, prog, dc); return;
  case NonLinearityType::GELU:
    // The tanh approximation PopLibs' GELU computes.
    popops::mapInPlace(g, pe::Const(0.5f) * pe::_1 *
                              (pe::Const(1.0f) + pe::Tanh(pe::Const(0.7978845608f) *
                                                          (pe::_1 + pe::Const(0.044715f) * pe::_1 * pe::_1 * pe::_1))),
                       {t}, prog, dc);
    return;
  case NonLinearityType::GELU_ERF: popops::mapInPlace(g, pe::GeluErf(pe::_1), {t}, prog, dc); return;
  case NonLinearityType::SWISH: popops::mapInPlace(g, pe::_1 * pe::Sigmoid(pe::_1), {t}, prog, dc); return;
  case NonLinearityType::SOFTMAX:
  case NonLinearityType::SOFTMAX_STABLE:
    softmaxRows(g, t, t, false, prog, dc);
    return;
  case NonLinearityType::SOFTMAX_SCALED:
    throw poputil::poplibs_error("popnn::nonLinearity: SOFTMAX_SCALED is not implemented by ipuxl (NotImplemented)");
  }
}

poplar::Tensor nonLinearity(poplar::Graph &g, NonLinearityType type, poplar::Tensor t, poplar::program::Sequence &prog,
                            const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  poplar::Tensor out = g.clone(t, poplar::DebugContext(dc, "nonLinearity"));
  if (type == NonLinearityType::SOFTMAX || type == NonLinearityType::SOFTMAX_STABLE) {
    softmaxRows(g, t, out, false, prog, dc);
    return out;
  }
  prog.add(poplar::program::Copy(t, out));
  nonLinearityInPlace(g, type, out, prog, dc, o);
  return out;
}

poplar::Tensor nonLinearityInputGradient(poplar::Graph &g, NonLinearityType type, poplar::Tensor act,
                                         poplar::Tensor grad, poplar::program::Sequence &prog,
                                         const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  if (act.shape() != grad.shape())
    throw poputil::poplibs_error("popnn::nonLinearityInputGradient: the activations " + act.shapeToString() +
                                 " and the gradient " + grad.shapeToString() + " differ in shape");
  // act is the non-linearity's output, except for GELU, GELU_ERF and SWISH
  // where it is its input (as PopLibs documents).
  switch (type) {
  case NonLinearityType::SIGMOID:
    return popops::map(g, pe::_2 * pe::_1 * (pe::Const(1.0f) - pe::_1), {act, grad}, prog, dc);
  case NonLinearityType::HARD_SIGMOID:
    return popops::map(g, pe::Select(pe::Const(0.2f) * pe::_2, pe::Const(0.0f),
                                     (pe::_1 > pe::Const(0.0f)) && (pe::_1 < pe::Const(1.0f))),
                       {act, grad}, prog, dc);
  case NonLinearityType::RELU:
    return popops::map(g, pe::Select(pe::_2, pe::Const(0.0f), pe::_1 > pe::Const(0.0f)), {act, grad}, prog, dc);
  case NonLinearityType::TANH:
    return popops::map(g, pe::_2 * (pe::Const(1.0f) - pe::_1 * pe::_1), {act, grad}, prog, dc);
  case NonLinearityType::GELU: {
    // d/dx of 0.5 x (1 + tanh(u)), u = c (x + 0.044715 x^3).
    auto t = pe::Tanh(pe::Const(0.7978845608f) * (pe::_1 + pe::Const(0.044715f) * pe::_1 * pe::_1 * pe::_1));
    auto du = pe::Const(0.7978845608f) * (pe::Const(1.0f) + pe::Const(3.0f * 0.044715f) * pe::_1 * pe::_1);
    return popops::map(g, pe::_2 * (pe::Const(0.5f) * (pe::Const(1.0f) + t) +
                                    pe::Const(0.5f) * pe::_1 * (pe::Const(1.0f) - t * t) * du),
                       {act, grad}, prog, dc);
  }
  case NonLinearityType::GELU_ERF:
    // Phi(x) + x phi(x).
    return popops::map(g, pe::_2 * (pe::Const(0.5f) * (pe::Const(1.0f) + pe::Erf(pe::_1 * pe::Const(0.70710678118f))) +
                                    pe::_1 * pe::Const(0.39894228040f) *
                                        pe::Exp(pe::Const(-0.5f) * pe::_1 * pe::_1)),
                       {act, grad}, prog, dc);
  case NonLinearityType::SWISH:
    // s (1 + x (1 - s)), s = sigmoid(x).
    return popops::map(g, pe::_2 * pe::Sigmoid(pe::_1) * (pe::Const(1.0f) + pe::_1 * (pe::Const(1.0f) - pe::Sigmoid(pe::_1))),
                       {act, grad}, prog, dc);
  case NonLinearityType::SOFTMAX:
  case NonLinearityType::SOFTMAX_STABLE: {
    // y (g - sum(g y)) over the innermost dimension.
    if (act.rank() == 0) throw poputil::poplibs_error("popnn::nonLinearityInputGradient: softmax needs rank 1 or more");
    std::size_t n = act.dim(act.rank() - 1), rows = n ? act.numElements() / n : 0;
    poplar::Tensor y = act.reshape({rows, n}), gr = grad.reshape({rows, n});
    poplar::Tensor gy = popops::mul(g, y, gr, prog, dc);
    poplar::Tensor sum = popops::reduce(g, gy, {1}, popops::Operation::ADD, prog, dc);
    poplar::Tensor out = popops::map(g, pe::_1 * (pe::_2 - pe::_3), {y, gr, sum.reshape({rows, 1})}, prog, dc);
    return out.reshape(act.shape());
  }
  case NonLinearityType::SOFTMAX_SCALED:
    break;
  }
  throw poputil::poplibs_error("popnn::nonLinearityInputGradient: SOFTMAX_SCALED is not implemented by ipuxl "
                               "(NotImplemented)");
}

poplar::Tensor logSoftmax(poplar::Graph &g, poplar::Tensor t, poplar::program::Sequence &prog,
                          const poplar::DebugContext &dc) {
  poplar::Tensor out = g.clone(t, poplar::DebugContext(dc, "logSoftmax"));
  softmaxRows(g, t, out, true, prog, dc);
  return out;
}
void logSoftmaxInPlace(poplar::Graph &g, poplar::Tensor t, poplar::program::Sequence &prog,
                       const poplar::DebugContext &dc) {
  softmaxRows(g, t, t, true, prog, dc);
}

poplar::program::Program calcLoss(poplar::Graph &g, const poplar::Tensor &probs, const poplar::Tensor &expected,
                                  const poplar::Tensor &loss, const poplar::Tensor &deltas, LossType type,
                                  const poplar::DebugContext &dc) {
  popops::ipuxl::requireCodelets(g, "popnn::ipuxl::Loss", "popnn");
  checkLossShapes(probs, expected, loss, deltas);
  auto *plan = new LossPlan{type, probs.elementType().ipuxlCode(), expected.elementType().ipuxlCode(),
                            loss.elementType().ipuxlCode(), deltas.elementType().ipuxlCode(), probs.dim(1)};
  poplar::ComputeSet cs = g.addComputeSet(poplar::DebugContext(dc, "loss"));
  auto v = g.addVertex(cs, "popnn::ipuxl::Loss");
  g.connect(v["probs"], probs.flatten());
  g.connect(v["labels"], expected.flatten());
  g.connect(v["loss"], loss.flatten());
  g.connect(v["deltas"], deltas.flatten());
  g.setInitialValue(v["plan"], popops::ipuxl::keepPlan(plan));
  g.setTileMapping(v, firstTile(g, loss));
  g.setPerfEstimate(v, 30 + 20 * probs.numElements());
  return poplar::program::Execute(cs);
}

poplar::program::Program calcLoss(poplar::Graph &g, const poplar::Tensor &probs, const poplar::Tensor &expected,
                                  const poplar::Tensor &loss, const poplar::Tensor &deltas, const poplar::Tensor &,
                                  const poplar::Tensor &, LossType type, const poplar::DebugContext &dc) {
  (void)g; (void)probs; (void)expected; (void)loss; (void)deltas; (void)type; (void)dc;
  throw poputil::poplibs_error("popnn::calcLoss with deltasScale/modelOutputScaling is not implemented by ipuxl "
                               "(NotImplemented); use calcLoss(graph, modelOutputs, expected, loss, deltas[, numCorrect], lossType)");
}

poplar::program::Program calcAccuracy(poplar::Graph &g, const poplar::Tensor &probs, const poplar::Tensor &expected,
                                      const poplar::Tensor &numCorrect, const poplar::DebugContext &dc) {
  popops::ipuxl::requireCodelets(g, "popnn::ipuxl::Accuracy", "popnn");
  if (numCorrect.numElements() != 1) throw poputil::poplibs_error("popnn::calcAccuracy: numCorrect must have one element");
  if (probs.rank() != 2 || expected.numElements() != probs.dim(0))
    throw poputil::poplibs_error("popnn::calcAccuracy: modelOutputs must be [batch, classes] with one label per row");
  auto *plan = new ArgPlan{probs.elementType().ipuxlCode(), expected.elementType().ipuxlCode(),
                           numCorrect.elementType().ipuxlCode(), probs.dim(1)};
  poplar::ComputeSet cs = g.addComputeSet(poplar::DebugContext(dc, "accuracy"));
  auto v = g.addVertex(cs, "popnn::ipuxl::Accuracy");
  g.connect(v["probs"], probs.flatten());
  g.connect(v["labels"], expected.flatten());
  g.connect(v["numCorrect"], numCorrect.flatten());
  g.setInitialValue(v["plan"], popops::ipuxl::keepPlan(plan));
  g.setTileMapping(v, firstTile(g, numCorrect));
  g.setPerfEstimate(v, 30 + 4 * probs.numElements());
  return poplar::program::Execute(cs);
}

poplar::program::Program calcLoss(poplar::Graph &g, const poplar::Tensor &probs, const poplar::Tensor &expected,
                                  const poplar::Tensor &loss, const poplar::Tensor &deltas,
                                  const poplar::Tensor &numCorrect, LossType type, const poplar::DebugContext &dc) {
  poplar::program::Sequence s;
  s.add(calcLoss(g, probs, expected, loss, deltas, type, dc));
  s.add(calcAccuracy(g, probs, expected, numCorrect, dc));
  return s;
}

namespace {
poplar::Tensor argExtreme(poplar::Graph &g, const poplar::Tensor &in, poplar::program::Sequence &prog,
                          const poplar::DebugContext &dc, bool min) {
  const std::string fn = min ? "argMin" : "argMax";
  const char *vertex = min ? "popnn::ipuxl::ArgMin" : "popnn::ipuxl::ArgMax";
  popops::ipuxl::requireCodelets(g, vertex, "popnn");
  if (in.rank() != 2) throw poputil::poplibs_error("popnn::" + fn + ": needs [batch, classes], got " + in.shapeToString());
  if (in.dim(1) == 0) throw poputil::poplibs_error("popnn::" + fn + ": needs at least one class, got " + in.shapeToString());
  poplar::Tensor out = g.addVariable(poplar::UNSIGNED_INT, {in.dim(0)}, poplar::DebugContext(dc, fn));
  g.setTileMapping(out, firstTile(g, in));
  auto *plan = new ArgPlan{in.elementType().ipuxlCode(), 0, poplar::ipuxl_detail::T_UNSIGNED_INT, in.dim(1)};
  poplar::ComputeSet cs = g.addComputeSet(poplar::DebugContext(dc, fn));
  auto v = g.addVertex(cs, vertex);
  g.connect(v["in"], in.flatten());
  g.connect(v["out"], out);
  g.setInitialValue(v["plan"], popops::ipuxl::keepPlan(plan));
  g.setTileMapping(v, firstTile(g, out));
  g.setPerfEstimate(v, 30 + 2 * in.numElements());
  prog.add(poplar::program::Execute(cs));
  return out;
}
} // namespace

poplar::Tensor argMax(poplar::Graph &g, const poplar::Tensor &in, poplar::program::Sequence &prog,
                      const poplar::DebugContext &dc) {
  return argExtreme(g, in, prog, dc, false);
}

poplar::Tensor argMin(poplar::Graph &g, const poplar::Tensor &in, poplar::program::Sequence &prog,
                      const poplar::DebugContext &dc) {
  return argExtreme(g, in, prog, dc, true);
}

} // namespace popnn
