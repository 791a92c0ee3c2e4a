// popops multiSlice/multiUpdate*, popnn group/layer/instance norm and the
// non-linearity gradients: results checked against NumPy by pytest.
#include "report.hpp"
#include <popnn/GroupNorm.hpp>
#include <popnn/InstanceNorm.hpp>
#include <popnn/LayerNorm.hpp>
#include <popnn/NonLinearity.hpp>
#include <popnn/codelets.hpp>
#include <popops/Cast.hpp>
#include <popops/DynamicSlice.hpp>
#include <popops/codelets.hpp>
#include <poputil/TileMapping.hpp>

using namespace poplar;
using namespace poplar::program;

int main() {
  IPUModel model;
  model.tilesPerIPU = 8;
  Device dev = model.createDevice();
  Graph g(dev.getTarget());
  popops::addCodelets(g);
  popnn::addCodelets(g);
  Sequence prog;
  std::vector<std::pair<std::string, Tensor>> outs;
  std::vector<std::pair<std::string, Tensor>> ins;
  auto in = [&](const std::string &n, Type t, std::vector<std::size_t> s) {
    Tensor x = g.addVariable(t, s, n);
    poputil::mapTensorLinearly(g, x);
    g.createHostWrite(n, x);
    ins.push_back({n, x});
    return x;
  };
  auto out = [&](const std::string &n, Tensor t) {
    if (t.elementType() != FLOAT) t = popops::cast(g, t, FLOAT, prog);
    outs.push_back({n, t});
    g.createHostRead(n, t);
  };

  // ---- multiSlice family: an embedding {10, 12} sliced along 0, and a {3, 10, 4} tensor along 1.
  popops::SlicePlan plan = popops::embedding::plan(g, FLOAT, 10, 12, {5}, {});
  Tensor emb = popops::createSliceableTensor(g, FLOAT, {10, 12}, {0}, {1}, plan, {}, "emb");
  g.createHostWrite("emb", emb);
  ins.push_back({"emb", emb});
  Tensor idx = popops::createIndicesTensor(g, {0}, 5, plan, {}, "idx");
  g.createHostWrite("idx", idx);
  out("ms", popops::multiSlice(g, emb, idx, {0}, {1}, prog, plan, {}));
  out("ms_static", popops::multiSlice(g, emb, ArrayRef<unsigned>({7, 0, 7}), 0, prog));
  Tensor t3 = in("t3", FLOAT, {3, 10, 4});
  Tensor idx2 = in("idx2", INT, {4});
  out("ms_dim1_size2", popops::multiSlice(g, t3, idx2, {1}, {2}, prog, plan, {}));
  out("ms_remap", popops::multiSlice(g, t3, idx2, {1}, {2}, prog, plan, {{"remapOutOfBoundIndices", "true"}}));
  Tensor upd = in("upd", FLOAT, {5, 1, 12});
  Tensor e1 = g.clone(emb, "e1");
  prog.add(Copy(emb, e1));
  popops::multiUpdate(g, e1, upd, idx, {0}, {1}, prog, plan, {});
  out("mu", e1);
  Tensor e2 = g.clone(emb, "e2");
  prog.add(Copy(emb, e2));
  Tensor scale = g.addConstant<float>(FLOAT, {}, -0.5f);
  g.setTileMapping(scale, 3);
  popops::multiUpdateAdd(g, e2, upd, idx, scale, {0}, {1}, prog, plan, {});
  out("mua", e2);
  Tensor e3 = g.clone(emb, "e3");
  prog.add(Copy(emb, e3));
  popops::multiUpdateMax(g, e3, upd, idx, {0}, {1}, prog, plan, {});
  out("mumax", e3);
  Tensor eh = popops::cast(g, emb, HALF, prog), uh = popops::cast(g, upd, HALF, prog);
  Tensor fscale = g.addConstant<float>(FLOAT, {}, 0.25f);
  g.setTileMapping(fscale, 1);
  popops::multiUpdateAdd(g, eh, uh, idx, fscale, {0}, {1}, prog, plan, {}); // half data, a float scale
  out("mua_half", eh);
  Tensor gemb = popops::createGroupedSliceableTensor(g, FLOAT, 2, {10, 12}, {0}, {1}, plan, {}, "gemb");
  g.createHostWrite("gemb", gemb);
  ins.push_back({"gemb", gemb});
  Tensor gidx = popops::createGroupedIndicesTensor(g, 2, {0}, 3, plan, {}, "gidx");
  g.createHostWrite("gidx", gidx);
  out("gms", popops::groupedMultiSlice(g, gemb, gidx, {0}, {1}, prog, plan, {}));
  Tensor gupd = in("gupd", FLOAT, {2, 3, 1, 12});
  Tensor gemb2 = g.clone(gemb, "gemb2");
  prog.add(Copy(gemb, gemb2));
  popops::groupedMultiUpdateAdd(g, gemb2, gupd, gidx, scale, {0}, {1}, prog, plan, {});
  out("gmua", gemb2);
  Tensor t3u = in("t3u", FLOAT, {4, 3, 2, 4});
  Tensor t3c = g.clone(t3, "t3c");
  prog.add(Copy(t3, t3c));
  popops::multiUpdateAdd(g, t3c, t3u, idx2, scale, {1}, {2}, prog, plan, {});
  out("mua_dim1", t3c);

  // ---- norms: acts [4, 6, 5] (B, C, F), gamma/beta {6}.
  Tensor acts = in("acts", FLOAT, {4, 6, 5}), gamma = in("gamma", FLOAT, {6}), beta = in("beta", FLOAT, {6});
  Tensor gin = in("gin", FLOAT, {4, 6, 5});
  for (int strided = 0; strided < 2; ++strided) {
    OptionFlags o{{"groupNormStridedChannelGrouping", strided ? "true" : "false"}};
    std::string sfx = strided ? "_strided" : "";
    auto st = popnn::gn::groupNormStatistics(g, acts, 1e-3f, prog, 3, false, false, FLOAT, {}, o);
    out("gn_mean" + sfx, st.first);
    out("gn_istd" + sfx, st.second);
    auto nrm = popnn::gn::groupNormalise(g, acts, gamma, beta, st.first, st.second, prog, {}, o);
    out("gn_out" + sfx, nrm.first);
    out("gn_grad" + sfx, popnn::gn::groupNormGradients(g, acts, gin, st.first, st.second, gamma, prog, FLOAT, {}, o));
    auto pg = popnn::gn::groupNormParamGradients(g, acts, gin, st.first, st.second, prog, FLOAT, {}, o);
    out("gn_dgamma" + sfx, pg.first);
    out("gn_dbeta" + sfx, pg.second);
  }
  Tensor x2 = in("x2", FLOAT, {5, 8}), g2 = in("g2", FLOAT, {5, 8}), gm2 = in("gm2", FLOAT, {8}), bt2 = in("bt2", FLOAT, {8});
  auto ls = popnn::ln::layerNormStatistics(g, x2, 1e-5f, prog, true);
  out("ln_mean_unbiased", ls.first);
  out("ln_istd_unbiased", ls.second);
  auto lsb = popnn::ln::layerNormStatistics(g, x2, 1e-5f, prog, false);
  auto ln = popnn::ln::layerNormalise(g, x2, gm2, bt2, lsb.first, lsb.second, prog);
  out("ln_out", ln.first);
  out("ln_whiten", popnn::ln::layerNormWhiten(g, x2, lsb.first, lsb.second, prog));
  out("ln_grad", popnn::ln::layerNormGradients(g, x2, g2, lsb.first, lsb.second, gm2, prog));
  auto lpg = popnn::ln::layerNormParamGradients(g, ln.second, g2, prog);
  out("ln_dgamma", lpg.first);
  out("ln_dbeta", lpg.second);
  Tensor gm2c = g.clone(gm2, "gm2c"), bt2c = g.clone(bt2, "bt2c");
  prog.add(Copy(gm2, gm2c));
  prog.add(Copy(bt2, bt2c));
  popnn::ln::layerNormParamUpdate(g, lpg.first, lpg.second, -0.1f, gm2c, bt2c, prog);
  out("ln_gamma_upd", gm2c);
  out("ln_beta_upd", bt2c);
  Tensor xh = popops::cast(g, x2, HALF, prog);
  auto lh = popnn::ln::layerNormStatistics(g, xh, 1e-5f, prog, false);
  out("ln_half_out", popnn::ln::layerNormalise(g, xh, popops::cast(g, gm2, HALF, prog), popops::cast(g, bt2, HALF, prog),
                                                lh.first, lh.second, prog).first);
  auto is = popnn::in::instanceNormStatistics(g, acts, 1e-3f, prog, false);
  out("in_mean", is.first);

  // ---- non-linearity gradients (act: the output, the input for GELU, GELU_ERF, SWISH).
  using NL = popnn::NonLinearityType;
  std::vector<std::pair<std::string, NL>> nls = {{"sigmoid", NL::SIGMOID}, {"hard_sigmoid", NL::HARD_SIGMOID},
                                                 {"relu", NL::RELU},       {"tanh", NL::TANH},
                                                 {"gelu", NL::GELU},       {"gelu_erf", NL::GELU_ERF},
                                                 {"swish", NL::SWISH},     {"softmax", NL::SOFTMAX}};
  for (auto &nl : nls) {
    bool takesInput = nl.second == NL::GELU || nl.second == NL::GELU_ERF || nl.second == NL::SWISH;
    Tensor act = takesInput ? x2 : popnn::nonLinearity(g, nl.second, x2, prog);
    if (!takesInput) out("nl_" + nl.first, act);
    out("nlgrad_" + nl.first, popnn::nonLinearityInputGradient(g, nl.second, act, g2, prog));
  }

  Engine e(g, prog);
  e.load(dev);
  for (auto &kv : ins) {
    std::size_t n = kv.second.numElements();
    if (kv.second.elementType() == FLOAT) {
      std::vector<float> v = ramp(n, 0.21f, -2.3f);
      if (kv.first == "gin" || kv.first == "g2") v = ramp(n, 0.13f, -1.1f);
      e.writeTensor(kv.first, v.data(), v.data() + n);
      report("in_" + kv.first, kv.second.shape(), v);
    }
  }
  std::vector<unsigned> hidx = {3, 9, 3, 0, 12}; // 12 is outside the embedding: read as zeros, ignored by updates
  e.writeTensor("idx", hidx.data(), hidx.data() + hidx.size());
  report("in_idx", {5}, hidx);
  std::vector<int> hidx2 = {8, 0, 9, -1}; // 9 and -1: slices of 2 that do not fit in 10
  e.writeTensor("idx2", hidx2.data(), hidx2.data() + hidx2.size());
  report("in_idx2", {4}, hidx2);
  std::vector<unsigned> hgidx = {1, 1, 9, 0, 4, 11}; // group 0: 1, 1, 9; group 1: 0, 4, 11 (outside)
  e.writeTensor("gidx", hgidx.data(), hgidx.data() + hgidx.size());
  report("in_gidx", {2, 3}, hgidx);
  e.run();
  for (auto &o : outs) {
    std::vector<float> v(o.second.numElements());
    e.readTensor(o.first, v.data(), v.data() + v.size());
    report(o.first, o.second.shape(), v);
  }
  return 0;
}
