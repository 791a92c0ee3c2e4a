// ipuxl's PopLibs: popops element-wise operations. Every operation is a
// popops::map of an expression: one vertex per tile of the output, on the
// tile that holds those output elements; operands broadcast as NumPy does.
#pragma once
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <popops/Expr.hpp>
#include <string>
#include <vector>

namespace popops {

poplar::Tensor map(poplar::Graph &graph, const expr::Expr &expr, const std::vector<poplar::Tensor> &ts,
                   poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                   const poplar::OptionFlags &options = {});
void mapInPlace(poplar::Graph &graph, const expr::Expr &expr, const std::vector<poplar::Tensor> &ts,
                poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                const poplar::OptionFlags &options = {});
void mapWithOutput(poplar::Graph &graph, const expr::Expr &expr, const std::vector<poplar::Tensor> &ts,
                   const poplar::Tensor &out, poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                   const poplar::OptionFlags &options = {});
poplar::Tensor map(poplar::Graph &graph, expr::UnaryOpType op, const poplar::Tensor &t,
                   poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                   const poplar::OptionFlags &options = {});
poplar::Tensor map(poplar::Graph &graph, expr::BinaryOpType op, const poplar::Tensor &a, const poplar::Tensor &b,
                   poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                   const poplar::OptionFlags &options = {});
poplar::Tensor select(poplar::Graph &graph, const poplar::Tensor &a, const poplar::Tensor &b, const poplar::Tensor &pred,
                      poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                      const poplar::OptionFlags &options = {});
poplar::Tensor clamp(poplar::Graph &graph, const poplar::Tensor &a, const poplar::Tensor &lo, const poplar::Tensor &hi,
                     poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},
                     const poplar::OptionFlags &options = {});

#define POPOPS_IPUXL_UNARY_API(NAME)                                                               \
  poplar::Tensor NAME(poplar::Graph &graph, const poplar::Tensor &a, poplar::program::Sequence &prog, \
                      const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {}); \
  void NAME##InPlace(poplar::Graph &graph, const poplar::Tensor &a, poplar::program::Sequence &prog, \
                     const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {});
POPOPS_IPUXL_UNARY_API(abs)
POPOPS_IPUXL_UNARY_API(asin)
POPOPS_IPUXL_UNARY_API(bitwiseNot)
POPOPS_IPUXL_UNARY_API(cbrt)
POPOPS_IPUXL_UNARY_API(ceil)
POPOPS_IPUXL_UNARY_API(cos)
POPOPS_IPUXL_UNARY_API(erf)
POPOPS_IPUXL_UNARY_API(exp)
POPOPS_IPUXL_UNARY_API(expm1)
POPOPS_IPUXL_UNARY_API(exp2)
POPOPS_IPUXL_UNARY_API(floor)
POPOPS_IPUXL_UNARY_API(geluErf)
POPOPS_IPUXL_UNARY_API(inv)
POPOPS_IPUXL_UNARY_API(log)
POPOPS_IPUXL_UNARY_API(log1p)
POPOPS_IPUXL_UNARY_API(logicalNot)
POPOPS_IPUXL_UNARY_API(neg)
POPOPS_IPUXL_UNARY_API(round)
POPOPS_IPUXL_UNARY_API(signum)
POPOPS_IPUXL_UNARY_API(sin)
POPOPS_IPUXL_UNARY_API(sqrt)
POPOPS_IPUXL_UNARY_API(square)
POPOPS_IPUXL_UNARY_API(tan)
POPOPS_IPUXL_UNARY_API(tanh)
POPOPS_IPUXL_UNARY_API(sigmoid)
POPOPS_IPUXL_UNARY_API(rsqrt)
POPOPS_IPUXL_UNARY_API(trunc)
#undef POPOPS_IPUXL_UNARY_API
poplar::Tensor isFinite(poplar::Graph &graph, const poplar::Tensor &a, poplar::program::Sequence &prog,
                        const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {});

#define POPOPS_IPUXL_BINARY_API(NAME)                                                              \
  poplar::Tensor NAME(poplar::Graph &graph, const poplar::Tensor &a, const poplar::Tensor &b,      \
                      poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},        \
                      const poplar::OptionFlags &options = {});                                    \
  void NAME##InPlace(poplar::Graph &graph, const poplar::Tensor &a, const poplar::Tensor &b,       \
                     poplar::program::Sequence &prog, const poplar::DebugContext &dc = {},         \
                     const poplar::OptionFlags &options = {});                                     \
  poplar::Tensor NAME(poplar::Graph &graph, const poplar::Tensor &a, float b, poplar::program::Sequence &prog, \
                      const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {}); \
  void NAME##InPlace(poplar::Graph &graph, const poplar::Tensor &a, float b, poplar::program::Sequence &prog, \
                     const poplar::DebugContext &dc = {}, const poplar::OptionFlags &options = {});
POPOPS_IPUXL_BINARY_API(add)
POPOPS_IPUXL_BINARY_API(atan2)
POPOPS_IPUXL_BINARY_API(bitwiseAnd)
POPOPS_IPUXL_BINARY_API(bitwiseOr)
POPOPS_IPUXL_BINARY_API(bitwiseXor)
POPOPS_IPUXL_BINARY_API(div)
POPOPS_IPUXL_BINARY_API(eq)
POPOPS_IPUXL_BINARY_API(gteq)
POPOPS_IPUXL_BINARY_API(gt)
POPOPS_IPUXL_BINARY_API(lteq)
POPOPS_IPUXL_BINARY_API(logicalAnd)
POPOPS_IPUXL_BINARY_API(logicalOr)
POPOPS_IPUXL_BINARY_API(lt)
POPOPS_IPUXL_BINARY_API(max)
POPOPS_IPUXL_BINARY_API(min)
POPOPS_IPUXL_BINARY_API(mul)
POPOPS_IPUXL_BINARY_API(neq)
POPOPS_IPUXL_BINARY_API(pow)
POPOPS_IPUXL_BINARY_API(rem)
POPOPS_IPUXL_BINARY_API(shiftLeft)
POPOPS_IPUXL_BINARY_API(shiftRight)
POPOPS_IPUXL_BINARY_API(sub)
#undef POPOPS_IPUXL_BINARY_API

} // namespace popops
