// ipuxl's PopLibs: popnn group normalisation (layer and instance
// normalisation are its one-group and group-per-channel cases), built from
// popops reductions and element-wise maps over a grouped view of the
// activations: [B][C][..F..] seen as [B][G][C/G][F].
#include "../popops/builtin.hpp"

#include <popnn/GroupNorm.hpp>
#include <popops/Cast.hpp>
#include <popops/ElementWise.hpp>
#include <popops/Reduce.hpp>
#include <popops/ScaledAdd.hpp>

namespace popnn {
namespace gn {
namespace {
namespace pe = popops::expr;

bool stridedGrouping(const poplar::OptionFlags &o) {
  if (!o.ipuxlHas("groupNormStridedChannelGrouping")) return false;
  std::string v = o.at("groupNormStridedChannelGrouping");
  if (v != "true" && v != "false")
    throw poputil::poplibs_error("popnn::gn: option groupNormStridedChannelGrouping must be true or false, not '" + v + "'");
  return v == "true";
}

struct Shape {
  std::size_t B, C, G, F;
};

Shape shapeOf(const poplar::Tensor &acts, std::size_t groups, const char *op) {
  if (acts.rank() < 2)
    throw poputil::poplibs_error(std::string(op) + ": activations must be [B][C][..F..], got " + acts.shapeToString());
  Shape s{acts.dim(0), acts.dim(1), groups, 1};
  if (s.G == 0 || s.C % s.G != 0)
    throw poputil::poplibs_error(std::string(op) + ": " + std::to_string(s.C) + " channels do not split in " +
                                 std::to_string(s.G) + " groups");
  for (unsigned k = 2; k < acts.rank(); ++k) s.F *= acts.dim(k);
  return s;
}

/// t ([B][C][..F..]) as [B][G][C/G][F].
poplar::Tensor grouped(const poplar::Tensor &t, const Shape &s, bool strided) {
  if (strided) return t.reshape({s.B, s.C / s.G, s.G, s.F}).dimShuffle({0, 2, 1, 3});
  return t.reshape({s.B, s.G, s.C / s.G, s.F});
}

/// A per-(batch, group) statistic {B*G} as [B][G][1][1] for broadcasting.
poplar::Tensor perGroup(const poplar::Tensor &stat, const Shape &s, const char *op) {
  if (stat.numElements() != s.B * s.G)
    throw poputil::poplibs_error(std::string(op) + ": a statistic has " + std::to_string(stat.numElements()) +
                                 " elements, {B * numGroups} = " + std::to_string(s.B * s.G) + " expected");
  return stat.reshape({s.B, s.G, 1, 1});
}

/// A per-channel {C} tensor shaped to broadcast against [B][C][..F..].
poplar::Tensor perChannel(const poplar::Tensor &p, const poplar::Tensor &acts, const char *what) {
  if (p.numElements() != acts.dim(1))
    throw poputil::poplibs_error(std::string("popnn::gn: ") + what + " has " + std::to_string(p.numElements()) +
                                 " elements, one per channel (" + std::to_string(acts.dim(1)) + ") expected");
  std::vector<std::size_t> shape(acts.rank() - 1, 1);
  shape[0] = acts.dim(1);
  return p.reshape(shape);
}

poplar::Type partials(const poplar::Type &acts, const poplar::Type &requested) {
  // A narrower partials type than the activations' is ignored (as documented).
  return acts.ipuxlSize() > requested.ipuxlSize() ? acts : requested;
}

/// Groups are recovered from the statistics' size: {B * G}.
std::size_t groupsOf(const poplar::Tensor &acts, const poplar::Tensor &stat) {
  std::size_t B = acts.rank() ? acts.dim(0) : 0;
  return B && stat.numElements() % B == 0 ? stat.numElements() / B : 0;
}

std::vector<std::size_t> allButChannel(const poplar::Tensor &t) {
  std::vector<std::size_t> d{0};
  for (std::size_t k = 2; k < t.rank(); ++k) d.push_back(k);
  return d;
}
} // namespace

std::pair<poplar::Tensor, poplar::Tensor> groupNormStatistics(poplar::Graph &g, const poplar::Tensor acts, float eps,
                                                              poplar::program::Sequence &prog, unsigned numGroups,
                                                              bool unbiased, bool, const poplar::Type &partialsType,
                                                              const poplar::DebugContext &dc,
                                                              const poplar::OptionFlags &options) {
  const char *op = "popnn::gn::groupNormStatistics";
  Shape s = shapeOf(acts, numGroups, op);
  poplar::Type pt = partials(acts.elementType(), partialsType);
  poplar::Tensor x = acts.elementType() == pt ? acts : popops::cast(g, acts, pt, prog, {dc, "partials"});
  poplar::Tensor x4 = grouped(x, s, stridedGrouping(options));
  const std::size_t n = (s.C / s.G) * s.F;
  poplar::Tensor mean = popops::reduce(g, x4, pt, {2, 3}, popops::ReduceParams(popops::Operation::ADD, 1.0f / n), prog,
                                       {dc, "mean"});
  // The variance around the mean (the stable algorithm, whatever stableAlgo says).
  poplar::Tensor centred = popops::sub(g, x4, mean.reshape({s.B, s.G, 1, 1}), prog, {dc, "centred"});
  float varScale = unbiased && n > 1 ? 1.0f / (n - 1) : 1.0f / n;
  poplar::Tensor var = popops::reduce(g, centred, pt, {2, 3},
                                      popops::ReduceParams(popops::Operation::SQUARE_ADD, varScale), prog, {dc, "var"});
  poplar::Tensor istd = popops::map(g, pe::Rsqrt(pe::_1 + pe::Const(eps)), {var}, prog, {dc, "invStdDev"});
  poplar::Type at = acts.elementType();
  if (pt != at) {
    mean = popops::cast(g, mean, at, prog, {dc, "mean"});
    istd = popops::cast(g, istd, at, prog, {dc, "invStdDev"});
  }
  return {mean.flatten(), istd.flatten()};
}

poplar::Tensor groupNormWhiten(poplar::Graph &g, const poplar::Tensor &acts, const poplar::Tensor &mean,
                               const poplar::Tensor &invStdDev, poplar::program::Sequence &prog,
                               const poplar::DebugContext &dc, const poplar::OptionFlags &options) {
  const char *op = "popnn::gn::groupNormWhiten";
  Shape s = shapeOf(acts, groupsOf(acts, mean), op);
  bool strided = stridedGrouping(options);
  poplar::Tensor out = g.clone(acts, {dc, "whitened"});
  popops::mapWithOutput(g, (pe::_1 - pe::Cast(pe::_2, acts.elementType())) * pe::Cast(pe::_3, acts.elementType()),
                        {grouped(acts, s, strided), perGroup(mean, s, op), perGroup(invStdDev, s, op)},
                        grouped(out, s, strided), prog, {dc, "whiten"});
  return out;
}

std::pair<poplar::Tensor, poplar::Tensor> groupNormalise(poplar::Graph &g, const poplar::Tensor &acts,
                                                         const poplar::Tensor &gamma, const poplar::Tensor &beta,
                                                         const poplar::Tensor &mean, const poplar::Tensor &invStdDev,
                                                         poplar::program::Sequence &prog, const poplar::DebugContext &dc,
                                                         const poplar::OptionFlags &options) {
  poplar::Tensor w = groupNormWhiten(g, acts, mean, invStdDev, prog, dc, options);
  poplar::Tensor out = popops::map(g, pe::_1 * pe::Cast(pe::_2, acts.elementType()) + pe::Cast(pe::_3, acts.elementType()),
                                   {w, perChannel(gamma, acts, "gamma"), perChannel(beta, acts, "beta")}, prog,
                                   {dc, "normalise"});
  return {out, w};
}

std::pair<poplar::Tensor, poplar::Tensor> groupNormParamGradients(poplar::Graph &g, const poplar::Tensor &actsWhitened,
                                                                  const poplar::Tensor &gradsIn,
                                                                  poplar::program::Sequence &prog,
                                                                  const poplar::Type &partialsType,
                                                                  const poplar::DebugContext &dc,
                                                                  const poplar::OptionFlags &) {
  if (gradsIn.shape() != actsWhitened.shape())
    throw poputil::poplibs_error("popnn::gn::groupNormParamGradients: gradsIn " + gradsIn.shapeToString() +
                                 " and the activations " + actsWhitened.shapeToString() + " differ in shape");
  shapeOf(actsWhitened, 1, "popnn::gn::groupNormParamGradients");
  poplar::Type at = actsWhitened.elementType(), pt = partials(at, partialsType);
  poplar::Tensor prod = popops::map(g, pe::Cast(pe::_1, pt) * pe::Cast(pe::_2, pt), {gradsIn, actsWhitened}, prog,
                                    {dc, "gradsInXWhitened"});
  auto dims = allButChannel(actsWhitened);
  poplar::Tensor gammaDelta = popops::reduce(g, prod, at, dims, popops::Operation::ADD, prog, {dc, "gammaDelta"});
  poplar::Tensor betaDelta = popops::reduce(g, gradsIn, at, dims, popops::Operation::ADD, prog, {dc, "betaDelta"});
  return {gammaDelta, betaDelta};
}

std::pair<poplar::Tensor, poplar::Tensor> groupNormParamGradients(poplar::Graph &g, const poplar::Tensor &acts,
                                                                  const poplar::Tensor &gradsIn,
                                                                  const poplar::Tensor &mean,
                                                                  const poplar::Tensor &iStdDev,
                                                                  poplar::program::Sequence &prog,
                                                                  const poplar::Type &partialsType,
                                                                  const poplar::DebugContext &dc,
                                                                  const poplar::OptionFlags &options) {
  poplar::Tensor w = groupNormWhiten(g, acts, mean, iStdDev, prog, dc, options);
  return groupNormParamGradients(g, w, gradsIn, prog, partialsType, dc, options);
}

poplar::Tensor groupNormGradients(poplar::Graph &g, const poplar::Tensor &actsWhitened, const poplar::Tensor &gradsIn,
                                  const poplar::Tensor &invStdDev, const poplar::Tensor &gamma,
                                  poplar::program::Sequence &prog, const poplar::Type &partialsType,
                                  const poplar::DebugContext &dc, const poplar::OptionFlags &options) {
  const char *op = "popnn::gn::groupNormGradients";
  if (gradsIn.shape() != actsWhitened.shape())
    throw poputil::poplibs_error(std::string(op) + ": gradsIn " + gradsIn.shapeToString() + " and the activations " +
                                 actsWhitened.shapeToString() + " differ in shape");
  Shape s = shapeOf(actsWhitened, groupsOf(actsWhitened, invStdDev), op);
  bool strided = stridedGrouping(options);
  poplar::Type at = actsWhitened.elementType(), pt = partials(at, partialsType);
  const float inv = 1.0f / static_cast<float>((s.C / s.G) * s.F);
  // g = gradsIn * gamma, in partials.
  poplar::Tensor gw = popops::map(g, pe::Cast(pe::_1, pt) * pe::Cast(pe::_2, pt),
                                  {gradsIn, perChannel(gamma, actsWhitened, "gamma")}, prog, {dc, "gradsXGamma"});
  poplar::Tensor gw4 = grouped(gw, s, strided), w4 = grouped(actsWhitened, s, strided);
  poplar::Tensor meanG = popops::reduce(g, gw4, pt, {2, 3}, popops::ReduceParams(popops::Operation::ADD, inv), prog,
                                        {dc, "meanGrad"});
  poplar::Tensor gxw = popops::map(g, pe::_1 * pe::Cast(pe::_2, pt), {gw4, w4}, prog, {dc, "gradXWhitened"});
  poplar::Tensor meanGW = popops::reduce(g, gxw, pt, {2, 3}, popops::ReduceParams(popops::Operation::ADD, inv), prog,
                                         {dc, "meanGradXWhitened"});
  poplar::Tensor out = g.clone(actsWhitened, {dc, "gradsOut"});
  popops::mapWithOutput(
      g, pe::Cast(pe::Cast(pe::_5, pt) * (pe::_1 - pe::_2 - pe::Cast(pe::_3, pt) * pe::_4), at),
      {gw4, meanG.reshape({s.B, s.G, 1, 1}), w4, meanGW.reshape({s.B, s.G, 1, 1}), perGroup(invStdDev, s, op)},
      grouped(out, s, strided), prog, {dc, "gradsOut"});
  return out;
}

poplar::Tensor groupNormGradients(poplar::Graph &g, const poplar::Tensor &acts, const poplar::Tensor &gradsIn,
                                  const poplar::Tensor &mean, const poplar::Tensor &invStdDev,
                                  const poplar::Tensor &gamma, poplar::program::Sequence &prog,
                                  const poplar::Type &partialsType, const poplar::DebugContext &dc,
                                  const poplar::OptionFlags &options) {
  poplar::Tensor w = groupNormWhiten(g, acts, mean, invStdDev, prog, dc, options);
  return groupNormGradients(g, w, gradsIn, invStdDev, gamma, prog, partialsType, dc, options);
}

void groupNormParamUpdate(poplar::Graph &g, const poplar::Tensor &gammaDelta, const poplar::Tensor &betaDelta,
                          float scale, poplar::Tensor &gamma, poplar::Tensor &beta, poplar::program::Sequence &prog,
                          const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  popops::scaledAddTo(g, gamma, gammaDelta, scale, prog, {dc, "gamma"});
  popops::scaledAddTo(g, beta, betaDelta, scale, prog, {dc, "beta"});
}
void groupNormParamUpdate(poplar::Graph &g, const poplar::Tensor &gammaDelta, const poplar::Tensor &betaDelta,
                          const poplar::Tensor &scale, poplar::Tensor &gamma, poplar::Tensor &beta,
                          poplar::program::Sequence &prog, const poplar::DebugContext &dc, const poplar::OptionFlags &) {
  popops::scaledAddTo(g, gamma, gammaDelta, scale, prog, {dc, "gamma"});
  popops::scaledAddTo(g, beta, betaDelta, scale, prog, {dc, "beta"});
}

} // namespace gn
} // namespace popnn
