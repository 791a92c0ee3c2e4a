// poplin convolutions with every ConvParams transform (truncation,
// dilation, padding and flip of input and kernel; truncation, stride and
// padding of the output), their weight deltas, and the input gradient of
// a strided convolution through getGradientParams + transposeAndFlipWeights.
// pytest recomputes each result with NumPy from the printed inputs.
#include "report.hpp"
#include <poplin/ConvUtil.hpp>
#include <poplin/Convolution.hpp>
#include <poplin/codelets.hpp>
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
  poplin::addCodelets(g);
  Sequence prog;
  std::vector<std::pair<std::string, Tensor>> ins, outs;
  auto host = [&](const std::string &n, Tensor x) {
    g.createHostWrite(n, x);
    ins.push_back({n, x});
    return x;
  };
  auto out = [&](const std::string &n, Tensor t) {
    outs.push_back({n, t});
    g.createHostRead(n, t);
  };

  // B 2, groups 2, 2 input and 3 output channels per group, field {5, 6}, kernel {3, 2}
  poplin::ConvParams p(FLOAT, FLOAT, 2, {5, 6}, {3, 2}, 2, 3, 2,
                       poplin::ConvParams::InputTransform({1, 0}, {0, 1}, {2, 1}, {1, 2}, {0, 1}, {false, true}),
                       poplin::ConvParams::InputTransform({0, 0}, {0, 0}, {1, 2}, {0, 1}, {1, 0}, {true, false}),
                       poplin::ConvParams::OutputTransform({1, 0}, {0, 1}, {2, 1}, {0, 1}, {1, 0}));
  Tensor x = host("x", poplin::createInput(g, p, "x"));
  Tensor w = host("w", poplin::createWeights(g, p, "w"));
  Tensor y = poplin::convolution(g, x, w, p, false, prog, "conv", {{"pass", "TRAINING_FWD"}});
  out("y", y);
  Tensor dy = host("dy", g.clone(y, "dy"));
  out("dw", poplin::calculateWeightDeltas(g, dy, x, p, prog, "wu"));
  Tensor w2 = g.clone(w, "w2");
  prog.add(Copy(w, w2));
  poplin::convolutionWeightUpdate(g, dy, w2, x, p, -0.5f, prog, "wu2");
  out("w_updated", w2);

  // the input gradient of a padded, strided, dilated convolution
  poplin::ConvParams f(FLOAT, FLOAT, 2, {7, 6}, {2, 3}, 3, 2, 1,
                       poplin::ConvParams::InputTransform({0, 0}, {0, 0}, {1, 1}, {1, 0}, {0, 2}, {false, false}),
                       poplin::ConvParams::InputTransform({0, 0}, {0, 0}, {2, 1}, {0, 0}, {0, 0}, {false, false}),
                       poplin::ConvParams::OutputTransform({0, 0}, {0, 0}, {3, 2}, {0, 0}, {0, 0}));
  poplin::ConvParams bwd = poplin::getGradientParams(f);
  Tensor fw = host("fw", poplin::createWeights(g, f, "fw"));
  std::vector<std::size_t> fy{2, 2};
  for (auto s : f.getOutputFieldShape()) fy.push_back(s);
  Tensor fdy = g.addVariable(FLOAT, fy, "fdy");
  poputil::mapTensorLinearly(g, fdy);
  host("fdy", fdy);
  out("fdx", poplin::convolution(g, fdy, fw, bwd, true, prog, "bwd", {{"pass", "TRAINING_BWD"}}));

  bool rejected = false;
  try {
    poplin::convolution(g, x, w, p, false, prog, "bad", {{"notAnOption", "1"}});
  } catch (const poplar::invalid_option &) {
    rejected = true;
  }
  report("rejected_unknown_option", {}, std::vector<int>{rejected ? 1 : 0});

  Engine e(g, prog);
  e.load(dev);
  for (auto &kv : ins) {
    std::size_t n = kv.second.numElements();
    std::vector<float> v = ramp(n, 0.19f + 0.01f * static_cast<float>(kv.first.size()), -2.1f);
    e.writeTensor(kv.first, v.data(), v.data() + n);
    report("in_" + kv.first, kv.second.shape(), v);
  }
  e.run();
  for (auto &o : outs) {
    std::vector<float> v(o.second.numElements());
    e.readTensor(o.first, v.data(), v.data() + v.size());
    report(o.first, o.second.shape(), v);
  }
  return 0;
}
