// ipuxl's PopLibs: popops::map. An expression is compiled into a postfix
// program evaluated per element (in double, stored in the output type); the
// output is split by its tile mapping into one MultiVertex per tile (each
// worker computes a sixth of the tile's elements).
#include "builtin.hpp"

#include <algorithm>
#include <limits>
#include <popops/ElementWise.hpp>
#include <popops/codelets.hpp>
#include <poputil/TileMapping.hpp>

namespace popops {
namespace ipuxl {

using namespace expr;
using poplar::ipuxl_detail::T_BOOL;

namespace {

enum class NodeKind { Input, Constant, Unary, Binary, Ternary, Cast };
struct Node {
  NodeKind kind;
  int op = 0;        // the Unary/Binary/TernaryOpType
  unsigned input = 0;
  double value = 0;
  int code = 0;      // the node's result type
};

struct MapPlan {
  std::vector<Node> prog;
  std::vector<int> inCodes;
  int outCode = 0;
  std::size_t opCount = 0;
};

bool boolResult(BinaryOpType op) {
  switch (op) {
  case BinaryOpType::EQUAL: case BinaryOpType::GREATER_THAN_EQUAL: case BinaryOpType::GREATER_THAN:
  case BinaryOpType::LESS_THAN_EQUAL: case BinaryOpType::LESS_THAN: case BinaryOpType::LOGICAL_AND:
  case BinaryOpType::LOGICAL_OR: case BinaryOpType::NOT_EQUAL: return true;
  default: return false;
  }
}

/// Compiles `e` into plan.prog; returns the node's type code (0: a constant
/// whose type follows its sibling).
int compileExpr(const Expr &e, const std::vector<poplar::Tensor> &ts, MapPlan &plan, int hint) {
  if (auto p = e.getAs<PlaceHolder>()) {
    if (p->getIndex() == 0 || p->getIndex() > ts.size())
      throw poputil::poplibs_error("popops::map: placeholder _" + std::to_string(p->getIndex()) + " but only " +
                                   std::to_string(ts.size()) + " tensors given");
    Node n{NodeKind::Input};
    n.input = p->getIndex() - 1;
    n.code = ts[n.input].elementType().ipuxlCode();
    plan.prog.push_back(n);
    return n.code;
  }
  if (auto c = e.getAs<Const>()) {
    Node n{NodeKind::Constant};
    n.value = c->ipuxlValue();
    n.code = hint ? hint : c->getType().ipuxlCode();
    plan.prog.push_back(n);
    return n.code;
  }
  if (auto c = e.getAs<Cast>()) {
    compileExpr(c->getLHS(), ts, plan, 0);
    Node n{NodeKind::Cast};
    n.code = c->getRHSType().ipuxlCode();
    plan.prog.push_back(n);
    return n.code;
  }
  if (auto u = e.getAs<UnaryOp>()) {
    int code = compileExpr(u->getArg(), ts, plan, hint);
    Node n{NodeKind::Unary};
    n.op = static_cast<int>(u->getOpType());
    auto op = u->getOpType();
    n.code = (op == UnaryOpType::IS_FINITE || op == UnaryOpType::IS_INF || op == UnaryOpType::IS_NAN ||
              op == UnaryOpType::LOGICAL_NOT) ? T_BOOL : code;
    plan.prog.push_back(n);
    ++plan.opCount;
    return n.code;
  }
  if (auto b = e.getAs<BinaryOp>()) {
    // A constant takes the type of the other operand (as PopLibs casts it).
    bool lc = b->getLHS().isA<Const>(), rc = b->getRHS().isA<Const>();
    int code;
    if (lc && !rc) {
      std::size_t at = plan.prog.size();
      plan.prog.push_back(Node{NodeKind::Constant});
      int r = compileExpr(b->getRHS(), ts, plan, 0);
      Node cn{NodeKind::Constant};
      cn.value = b->getLHS().getAs<Const>()->ipuxlValue();
      cn.code = r;
      plan.prog[at] = cn;
      code = r;
    } else {
      int l = compileExpr(b->getLHS(), ts, plan, hint);
      int r = compileExpr(b->getRHS(), ts, plan, rc ? l : 0);
      code = l ? l : r;
    }
    Node n{NodeKind::Binary};
    n.op = static_cast<int>(b->getOpType());
    n.code = boolResult(b->getOpType()) ? T_BOOL : code;
    plan.prog.push_back(n);
    ++plan.opCount;
    return n.code;
  }
  if (auto t = e.getAs<TernaryOp>()) {
    int a = compileExpr(t->getArg0(), ts, plan, hint);
    compileExpr(t->getArg1(), ts, plan, a);
    compileExpr(t->getArg2(), ts, plan, t->getOpType() == TernaryOpType::SELECT ? T_BOOL : a);
    Node n{NodeKind::Ternary};
    n.op = static_cast<int>(t->getOpType());
    n.code = a;
    plan.prog.push_back(n);
    ++plan.opCount;
    return n.code;
  }
  throw poputil::poplibs_error("popops::map: unsupported expression node '" + e.name() + "'");
}

double roundTo(int code, double v) {
  if (code == poplar::ipuxl_detail::T_FLOAT) return static_cast<float>(v);
  if (code == poplar::ipuxl_detail::T_HALF) return static_cast<float>(poplar::half(static_cast<float>(v)));
  if (code == T_BOOL) return v != 0.0 ? 1.0 : 0.0;
  if (isIntegral(code)) return std::trunc(v);
  return v;
}

double unary(UnaryOpType op, double a, int code) {
  switch (op) {
  case UnaryOpType::ABSOLUTE: return std::fabs(a);
  case UnaryOpType::ASIN: return std::asin(a);
  case UnaryOpType::BITWISE_NOT: return static_cast<double>(~static_cast<long long>(a));
  case UnaryOpType::CBRT: return std::cbrt(a);
  case UnaryOpType::CEIL: return std::ceil(a);
  case UnaryOpType::COS: return std::cos(a);
  case UnaryOpType::ERF: return std::erf(a);
  case UnaryOpType::EXPONENT: return std::exp(a);
  case UnaryOpType::EXPONENT_MINUS_ONE: return std::expm1(a);
  case UnaryOpType::EXPONENT2: return std::exp2(a);
  case UnaryOpType::FLOOR: return std::floor(a);
  case UnaryOpType::GELU_ERF: return 0.5 * a * (1.0 + std::erf(a / std::sqrt(2.0)));
  case UnaryOpType::INVERSE: return 1.0 / a;
  case UnaryOpType::IS_FINITE: return std::isfinite(a);
  case UnaryOpType::IS_INF: return std::isinf(a);
  case UnaryOpType::IS_NAN: return std::isnan(a);
  case UnaryOpType::LOGARITHM: return std::log(a);
  case UnaryOpType::LOGARITHM_ONE_PLUS: return std::log1p(a);
  case UnaryOpType::LOGICAL_NOT: return a == 0.0;
  case UnaryOpType::NEARBY_INT: return std::nearbyint(a);
  case UnaryOpType::NEGATE: return -a;
  case UnaryOpType::POPCOUNT: return static_cast<double>(__builtin_popcountll(static_cast<unsigned long long>(a)));
  case UnaryOpType::COUNT_LEADING_ZEROS: {
    unsigned v = static_cast<unsigned>(static_cast<long long>(a));
    return v ? __builtin_clz(v) : 32;
  }
  case UnaryOpType::RELU: return a > 0 ? a : 0;
  case UnaryOpType::ROUND: return std::round(a);
  case UnaryOpType::SIGNUM: return (a > 0) - (a < 0);
  case UnaryOpType::SIN: return std::sin(a);
  case UnaryOpType::SQRT: return std::sqrt(a);
  case UnaryOpType::SQUARE: return a * a;
  case UnaryOpType::TAN: return std::tan(a);
  case UnaryOpType::TANH: return std::tanh(a);
  case UnaryOpType::SIGMOID: return 1.0 / (1.0 + std::exp(-a));
  case UnaryOpType::RSQRT: return 1.0 / std::sqrt(a);
  case UnaryOpType::TRUNC: return std::trunc(a);
  }
  (void)code;
  return 0;
}

double binary(BinaryOpType op, double a, double b, int code) {
  bool integral = isIntegral(code);
  auto ll = [](double x) { return static_cast<long long>(x); };
  switch (op) {
  case BinaryOpType::ADD: return a + b;
  case BinaryOpType::ATAN2: return std::atan2(a, b);
  case BinaryOpType::BITWISE_AND: return static_cast<double>(ll(a) & ll(b));
  case BinaryOpType::BITWISE_OR: return static_cast<double>(ll(a) | ll(b));
  case BinaryOpType::BITWISE_XOR: return static_cast<double>(ll(a) ^ ll(b));
  case BinaryOpType::BITWISE_XNOR: return static_cast<double>(~(ll(a) ^ ll(b)));
  case BinaryOpType::DIVIDE:
    if (integral) {
      if (ll(b) == 0) return 0; // undefined on the IPU; ipuxl gives 0
      return static_cast<double>(ll(a) / ll(b));
    }
    return a / b;
  case BinaryOpType::EQUAL: return a == b;
  case BinaryOpType::GREATER_THAN_EQUAL: return a >= b;
  case BinaryOpType::GREATER_THAN: return a > b;
  case BinaryOpType::INV_STD_DEV_TO_VARIANCE: return 1.0 / (a * a) - b;
  case BinaryOpType::LESS_THAN_EQUAL: return a <= b;
  case BinaryOpType::LOGICAL_AND: return a != 0 && b != 0;
  case BinaryOpType::LOGICAL_OR: return a != 0 || b != 0;
  case BinaryOpType::LESS_THAN: return a < b;
  case BinaryOpType::MAXIMUM: return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : std::max(a, b);
  case BinaryOpType::MINIMUM: return std::isnan(a) || std::isnan(b) ? std::numeric_limits<double>::quiet_NaN() : std::min(a, b);
  case BinaryOpType::MULTIPLY: return a * b;
  case BinaryOpType::NOT_EQUAL: return a != b;
  case BinaryOpType::POWER: return std::pow(a, b);
  case BinaryOpType::REMAINDER:
    if (integral) return ll(b) == 0 ? 0 : static_cast<double>(ll(a) % ll(b));
    return std::fmod(a, b);
  case BinaryOpType::SHIFT_LEFT: return static_cast<double>(static_cast<unsigned>(ll(a)) << ll(b));
  case BinaryOpType::SHIFT_RIGHT: return static_cast<double>(static_cast<unsigned>(ll(a)) >> ll(b));
  case BinaryOpType::SHIFT_RIGHT_SIGN_EXTEND: return static_cast<double>(static_cast<int>(ll(a)) >> ll(b));
  case BinaryOpType::SUBTRACT: return a - b;
  case BinaryOpType::VARIANCE_TO_INV_STD_DEV: return 1.0 / std::sqrt(a + b);
  }
  return 0;
}

/// The vertex: out[i] = expr(ins[0][i], ins[1][i], ...). A MultiVertex,
/// as popops' elementwise vertices: each of the tile's workers computes its
/// sixth of the elements.
class MapVertex : public poplar::MultiVertex {
public:
  poplar::Vector<poplar::Input<poplar::Vector<AnyElem>>> ins;
  poplar::Output<poplar::Vector<AnyElem>> out;
  unsigned long long plan;

  bool compute(unsigned worker) {
    const MapPlan &p = *planOf<MapPlan>(plan);
    std::size_t n = out.size(), workers = numWorkers();
    std::size_t per = (n + workers - 1) / workers;
    std::size_t begin = std::min(n, worker * per), end = std::min(n, begin + per);
    std::vector<double> stack(p.prog.size() + 1);
    std::vector<std::size_t> sizes(p.inCodes.size());
    for (std::size_t k = 0; k < p.inCodes.size(); ++k) sizes[k] = sizeOf(p.inCodes[k]);
    for (std::size_t i = begin; i < end; ++i) {
      std::size_t sp = 0;
      for (const auto &nd : p.prog) {
        switch (nd.kind) {
        case NodeKind::Input:
          stack[sp++] = load(nd.code, reinterpret_cast<const char *>(ins[nd.input].data()) + i * sizes[nd.input]);
          break;
        case NodeKind::Constant:
          stack[sp++] = roundTo(nd.code, nd.value);
          break;
        case NodeKind::Cast:
          stack[sp - 1] = roundTo(nd.code, stack[sp - 1]);
          break;
        case NodeKind::Unary:
          stack[sp - 1] = roundTo(nd.code, unary(static_cast<UnaryOpType>(nd.op), stack[sp - 1], nd.code));
          break;
        case NodeKind::Binary:
          --sp;
          stack[sp - 1] = roundTo(nd.code, binary(static_cast<BinaryOpType>(nd.op), stack[sp - 1], stack[sp], nd.code));
          break;
        case NodeKind::Ternary: {
          sp -= 2;
          double a = stack[sp - 1], b = stack[sp], c = stack[sp + 1];
          stack[sp - 1] = static_cast<TernaryOpType>(nd.op) == TernaryOpType::SELECT ? (c != 0 ? a : b)
                                                                                     : std::min(std::max(a, b), c);
          break;
        }
        }
      }
      store(p.outCode, reinterpret_cast<char *>(out.data()) + i * sizeOf(p.outCode), stack[0]);
    }
    return true;
  }
};

} // namespace

poplar::ipuxl_detail::VertexTypeInfo mapVertexType() {
  using namespace poplar::ipuxl_detail;
  return describe<MapVertex>("popops::ipuxl::Map", {field("ins", &MapVertex::ins), field("out", &MapVertex::out),
                                                    field("plan", &MapVertex::plan)});
}

/// Adds the vertices computing out = expr(ts...) to `prog`, one MultiVertex per tile of `out`.
void buildMap(poplar::Graph &graph, const Expr &e, const std::vector<poplar::Tensor> &ts, const poplar::Tensor &out,
              poplar::program::Sequence &prog, const poplar::DebugContext &dc) {
  requireCodelets(graph, "popops::ipuxl::Map", "popops");
  auto *plan = new MapPlan();
  plan->outCode = out.elementType().ipuxlCode();
  for (const auto &t : ts) plan->inCodes.push_back(t.elementType().ipuxlCode());
  compileExpr(e, ts, *plan, 0);
  std::vector<poplar::Tensor> flatIns;
  for (const auto &t : ts) flatIns.push_back(broadcastTo(t, out.shape()).flatten());
  poplar::Tensor flatOut = out.flatten();
  poplar::ComputeSet cs = graph.addComputeSet(poplar::DebugContext(dc, "map"));
  unsigned vw = std::max(1u, graph.getTarget().getVectorWidth(out.elementType()));
  for (const auto &part : partsByTile(graph, out)) {
    std::vector<poplar::Tensor> ins;
    for (const auto &fi : flatIns) ins.push_back(gatherIntervals(fi, part.intervals));
    poplar::Tensor o = gatherIntervals(flatOut, part.intervals);
    auto v = graph.addVertex(cs, "popops::ipuxl::Map");
    graph.connect(v["ins"], ins);
    if (ins.empty()) graph.setFieldSize(v["ins"], 0);
    graph.connect(v["out"], o);
    graph.setInitialValue(v["plan"], keepPlan(plan));
    graph.setTileMapping(v, part.tile);
    // Cycles of one worker: its sixth of the elements, vw a cycle per operation.
    std::size_t perWorker = (part.size + 5) / 6;
    graph.setPerfEstimate(v, 12 + (perWorker * std::max<std::size_t>(1, plan->opCount) + vw - 1) / vw);
  }
  prog.add(poplar::program::Execute(cs));
}

int resultType(const Expr &e, const std::vector<poplar::Tensor> &ts) {
  MapPlan probe;
  int code = compileExpr(e, ts, probe, 0);
  return code ? code : poplar::ipuxl_detail::T_FLOAT;
}

} // namespace ipuxl

using namespace ipuxl;

poplar::Tensor map(poplar::Graph &graph, const expr::Expr &e, const std::vector<poplar::Tensor> &ts,
                   poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  std::vector<std::vector<std::size_t>> shapes;
  for (const auto &t : ts) shapes.push_back(t.shape());
  auto shape = broadcastShapes(shapes, "popops::map");
  poplar::Type type(resultType(e, ts));
  poplar::Tensor out;
  const poplar::Tensor *like = nullptr;
  for (const auto &t : ts)
    if (t.shape() == shape) {
      like = &t;
      break;
    }
  if (like) {
    out = graph.clone(type, *like, poplar::DebugContext(dc, "out"));
  } else {
    out = graph.addVariable(type, shape, poplar::DebugContext(dc, "out"));
    poputil::mapTensorLinearly(graph, out);
  }
  buildMap(graph, e, ts, out, prog, dc);
  return out;
}

void mapInPlace(poplar::Graph &graph, const expr::Expr &e, const std::vector<poplar::Tensor> &ts,
                poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  if (ts.empty()) throw poputil::poplibs_error("popops::mapInPlace: no tensors given");
  std::vector<std::vector<std::size_t>> shapes;
  for (const auto &t : ts) shapes.push_back(t.shape());
  if (broadcastShapes(shapes, "popops::mapInPlace") != ts[0].shape())
    throw poputil::poplibs_error("popops::mapInPlace: the first operand " + ts[0].shapeToString() +
                                 " must have the broadcast shape of all operands");
  buildMap(graph, e, ts, ts[0], prog, dc);
}

void mapWithOutput(poplar::Graph &graph, const expr::Expr &e, const std::vector<poplar::Tensor> &ts,
                   const poplar::Tensor &out, poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                   const poplar::OptionFlags &) {
  std::vector<std::vector<std::size_t>> shapes;
  for (const auto &t : ts) shapes.push_back(t.shape());
  shapes.push_back(out.shape());
  if (broadcastShapes(shapes, "popops::mapWithOutput") != out.shape())
    throw poputil::poplibs_error("popops::mapWithOutput: the output " + out.shapeToString() +
                                 " does not have the operands' broadcast shape");
  buildMap(graph, e, ts, out, prog, dc);
}

poplar::Tensor map(poplar::Graph &graph, expr::UnaryOpType op, const poplar::Tensor &t, poplar::program::Sequence &prog,
                   const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  return map(graph, expr::UnaryOp(op, expr::_1), {t}, prog, dc, o);
}
poplar::Tensor map(poplar::Graph &graph, expr::BinaryOpType op, const poplar::Tensor &a, const poplar::Tensor &b,
                   poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  return map(graph, expr::BinaryOp(op, expr::_1, expr::_2), {a, b}, prog, dc, o);
}
poplar::Tensor select(poplar::Graph &graph, const poplar::Tensor &a, const poplar::Tensor &b, const poplar::Tensor &pred,
                      poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  return map(graph, expr::Select(expr::_1, expr::_2, expr::_3), {a, b, pred}, prog, dc, o);
}
poplar::Tensor clamp(poplar::Graph &graph, const poplar::Tensor &a, const poplar::Tensor &lo, const poplar::Tensor &hi,
                     poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  return map(graph, expr::Clamp(expr::_1, expr::_2, expr::_3), {a, lo, hi}, prog, dc, o);
}

#define POPOPS_IPUXL_UNARY_IMPL(NAME, OP)                                                          \
  poplar::Tensor NAME(poplar::Graph &g, const poplar::Tensor &a, poplar::program::Sequence &p,     \
                      const poplar::DebugContext &dc, const poplar::OptionFlags &o) {              \
    return map(g, expr::UnaryOp(expr::UnaryOpType::OP, expr::_1), {a}, p, dc, o);                  \
  }                                                                                                \
  void NAME##InPlace(poplar::Graph &g, const poplar::Tensor &a, poplar::program::Sequence &p,      \
                     const poplar::DebugContext &dc, const poplar::OptionFlags &o) {               \
    mapInPlace(g, expr::UnaryOp(expr::UnaryOpType::OP, expr::_1), {a}, p, dc, o);                  \
  }
POPOPS_IPUXL_UNARY_IMPL(abs, ABSOLUTE)
POPOPS_IPUXL_UNARY_IMPL(asin, ASIN)
POPOPS_IPUXL_UNARY_IMPL(bitwiseNot, BITWISE_NOT)
POPOPS_IPUXL_UNARY_IMPL(cbrt, CBRT)
POPOPS_IPUXL_UNARY_IMPL(ceil, CEIL)
POPOPS_IPUXL_UNARY_IMPL(cos, COS)
POPOPS_IPUXL_UNARY_IMPL(erf, ERF)
POPOPS_IPUXL_UNARY_IMPL(exp, EXPONENT)
POPOPS_IPUXL_UNARY_IMPL(expm1, EXPONENT_MINUS_ONE)
POPOPS_IPUXL_UNARY_IMPL(exp2, EXPONENT2)
POPOPS_IPUXL_UNARY_IMPL(floor, FLOOR)
POPOPS_IPUXL_UNARY_IMPL(geluErf, GELU_ERF)
POPOPS_IPUXL_UNARY_IMPL(inv, INVERSE)
POPOPS_IPUXL_UNARY_IMPL(log, LOGARITHM)
POPOPS_IPUXL_UNARY_IMPL(log1p, LOGARITHM_ONE_PLUS)
POPOPS_IPUXL_UNARY_IMPL(logicalNot, LOGICAL_NOT)
POPOPS_IPUXL_UNARY_IMPL(neg, NEGATE)
POPOPS_IPUXL_UNARY_IMPL(round, ROUND)
POPOPS_IPUXL_UNARY_IMPL(signum, SIGNUM)
POPOPS_IPUXL_UNARY_IMPL(sin, SIN)
POPOPS_IPUXL_UNARY_IMPL(sqrt, SQRT)
POPOPS_IPUXL_UNARY_IMPL(square, SQUARE)
POPOPS_IPUXL_UNARY_IMPL(tan, TAN)
POPOPS_IPUXL_UNARY_IMPL(tanh, TANH)
POPOPS_IPUXL_UNARY_IMPL(sigmoid, SIGMOID)
POPOPS_IPUXL_UNARY_IMPL(rsqrt, RSQRT)
POPOPS_IPUXL_UNARY_IMPL(trunc, TRUNC)
#undef POPOPS_IPUXL_UNARY_IMPL
poplar::Tensor isFinite(poplar::Graph &g, const poplar::Tensor &a, poplar::program::Sequence &p,
                        const poplar::DebugContext &dc, const poplar::OptionFlags &o) {
  return map(g, expr::IsFinite(expr::_1), {a}, p, dc, o);
}

#define POPOPS_IPUXL_BINARY_IMPL(NAME, OP)                                                         \
  poplar::Tensor NAME(poplar::Graph &g, const poplar::Tensor &a, const poplar::Tensor &b,          \
                      poplar::program::Sequence &p, const poplar::DebugContext &dc, const poplar::OptionFlags &o) { \
    return map(g, expr::BinaryOp(expr::BinaryOpType::OP, expr::_1, expr::_2), {a, b}, p, dc, o);   \
  }                                                                                                \
  void NAME##InPlace(poplar::Graph &g, const poplar::Tensor &a, const poplar::Tensor &b,           \
                     poplar::program::Sequence &p, const poplar::DebugContext &dc, const poplar::OptionFlags &o) { \
    mapInPlace(g, expr::BinaryOp(expr::BinaryOpType::OP, expr::_1, expr::_2), {a, b}, p, dc, o);   \
  }                                                                                                \
  poplar::Tensor NAME(poplar::Graph &g, const poplar::Tensor &a, float b, poplar::program::Sequence &p, \
                      const poplar::DebugContext &dc, const poplar::OptionFlags &o) {              \
    return map(g, expr::BinaryOp(expr::BinaryOpType::OP, expr::_1, expr::Const(b)), {a}, p, dc, o); \
  }                                                                                                \
  void NAME##InPlace(poplar::Graph &g, const poplar::Tensor &a, float b, poplar::program::Sequence &p, \
                     const poplar::DebugContext &dc, const poplar::OptionFlags &o) {               \
    mapInPlace(g, expr::BinaryOp(expr::BinaryOpType::OP, expr::_1, expr::Const(b)), {a}, p, dc, o); \
  }
POPOPS_IPUXL_BINARY_IMPL(add, ADD)
POPOPS_IPUXL_BINARY_IMPL(atan2, ATAN2)
POPOPS_IPUXL_BINARY_IMPL(bitwiseAnd, BITWISE_AND)
POPOPS_IPUXL_BINARY_IMPL(bitwiseOr, BITWISE_OR)
POPOPS_IPUXL_BINARY_IMPL(bitwiseXor, BITWISE_XOR)
POPOPS_IPUXL_BINARY_IMPL(div, DIVIDE)
POPOPS_IPUXL_BINARY_IMPL(eq, EQUAL)
POPOPS_IPUXL_BINARY_IMPL(gteq, GREATER_THAN_EQUAL)
POPOPS_IPUXL_BINARY_IMPL(gt, GREATER_THAN)
POPOPS_IPUXL_BINARY_IMPL(lteq, LESS_THAN_EQUAL)
POPOPS_IPUXL_BINARY_IMPL(logicalAnd, LOGICAL_AND)
POPOPS_IPUXL_BINARY_IMPL(logicalOr, LOGICAL_OR)
POPOPS_IPUXL_BINARY_IMPL(lt, LESS_THAN)
POPOPS_IPUXL_BINARY_IMPL(max, MAXIMUM)
POPOPS_IPUXL_BINARY_IMPL(min, MINIMUM)
POPOPS_IPUXL_BINARY_IMPL(mul, MULTIPLY)
POPOPS_IPUXL_BINARY_IMPL(neq, NOT_EQUAL)
POPOPS_IPUXL_BINARY_IMPL(pow, POWER)
POPOPS_IPUXL_BINARY_IMPL(rem, REMAINDER)
POPOPS_IPUXL_BINARY_IMPL(shiftLeft, SHIFT_LEFT)
POPOPS_IPUXL_BINARY_IMPL(shiftRight, SHIFT_RIGHT)
POPOPS_IPUXL_BINARY_IMPL(sub, SUBTRACT)
#undef POPOPS_IPUXL_BINARY_IMPL

} // namespace popops
