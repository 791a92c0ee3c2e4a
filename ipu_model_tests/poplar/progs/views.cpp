// Tensor views: each view of x is copied out and checked against NumPy.
#include "report.hpp"
#include <poputil/TileMapping.hpp>

using namespace poplar;
using namespace poplar::program;

int main() {
  IPUModel model;
  model.tilesPerIPU = 8;
  Device dev = model.createDevice();
  Graph g(dev.getTarget());
  Tensor x = input(g, "x", FLOAT, {3, 4, 5});
  Tensor y = input(g, "y", FLOAT, {3, 2, 5});
  Sequence prog;
  struct V { std::string name; Tensor t; };
  std::vector<V> views = {
      {"slice1", x.slice(1, 3, 1)},
      {"sliceND", x.slice({1, 0, 2}, {3, 3, 5})},
      {"index", x[2][1]},
      {"element", x[1][2][3]},
      {"indexList", x.index({0, 3})},
      {"reshape", x.reshape({6, 10})},
      {"flatten", x.flatten()},
      {"flatten12", x.flatten(1, 3)},
      {"dimShuffle", x.dimShuffle({2, 0, 1})},
      {"dimRoll", x.dimRoll(2, 0)},
      {"transpose", x[1].transpose()},
      {"concat1", concat(x, y, 1)},
      {"concatList", concat({y, x, y}, 1)},
      {"broadcast", x.slice(0, 1, 0).broadcast(3, 0)},
      {"expand", x.expand({1})},
      {"squeeze", x.slice(2, 3, 1).squeeze({1})},
      {"reverse", x.reverse(2)},
      {"subSample", x.subSample(2, 1)},
      {"upsample", x.upsample(2, 0, UpsampleMethod::REPEAT)},
      {"shuffleThenSlice", x.dimShuffle({1, 2, 0}).slice(1, 4, 1)[2]},
  };
  for (auto &v : views) output(g, prog, v.name, v.t);
  // reinterpret: int bits of float (same size)
  output(g, prog, "reinterpret", x.slice(0, 1, 0).reinterpret(INT));
  // Tile mappings
  Tensor lin = g.addVariable(FLOAT, {100}, "lin");
  poputil::mapTensorLinearly(g, lin, 10, 4);
  auto m = g.getTileMapping(lin);
  std::vector<std::size_t> mapping;
  for (unsigned t = 0; t < m.size(); ++t)
    for (auto &iv : m[t]) { mapping.push_back(t); mapping.push_back(iv.begin()); mapping.push_back(iv.end()); }
  report("linearMapping", {mapping.size() / 3, 3}, mapping);
  auto mt = g.getTileMapping(x.dimShuffle({2, 0, 1}));
  report("shuffledMappingTile0", {1}, std::vector<std::size_t>{mt[0].size() ? mt[0][0].size() : 0});
  std::cout << "@contiguous_slice " << x.slice(1, 2, 0).isContiguous() << "\n";
  std::cout << "@contiguous_shuffle " << x.dimShuffle({2, 0, 1}).isContiguous() << "\n";
  std::cout << "@intersects " << x[0].intersectsWith(x.slice(0, 1, 0)) << " " << x[0].intersectsWith(x[1]) << "\n";
  lin.numElements();
  g.setTileMapping(lin, 3);
  Engine e(g, prog);
  e.load(dev);
  auto hx = ramp(60), hy = ramp(30, 1.5f, 10.0f);
  e.writeTensor("x", hx.data(), hx.data() + hx.size());
  e.writeTensor("y", hy.data(), hy.data() + hy.size());
  e.run(0);
  report("x", x.shape(), hx);
  report("y", y.shape(), hy);
  for (auto &v : views) {
    std::vector<float> out(v.t.numElements());
    e.readTensor(v.name, out.data(), out.data() + out.size());
    report(v.name, v.t.shape(), out);
  }
  std::vector<int> ri(20);
  e.readTensor("reinterpret", ri.data(), ri.data() + ri.size());
  report("reinterpret", {20}, ri);
  return 0;
}
