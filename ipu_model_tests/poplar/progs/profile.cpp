// The IPU model's accounting of a Poplar program: vertices with known cycle
// estimates on known tiles, an edge read from another tile, a host stream.
// pytest recomputes the figures from the rules in docs/poplar.md.
#include "report.hpp"

using namespace poplar;
using namespace poplar::program;

int main(int argc, char **argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  IPUModel model;
  model.tilesPerIPU = 4;
  Device dev = model.createDevice();
  Graph g(dev.getTarget());
  g.addCodelets(dir + "/field_codelets.cpp");
  Tensor x = g.addVariable(FLOAT, {10, 8}, "x");
  Tensor y = g.addVariable(FLOAT, {10, 8}, "y");
  for (unsigned r = 0; r < 10; ++r) {
    g.setTileMapping(x[r], r % 2);     // rows on tiles 0 and 1
    g.setTileMapping(y[r], r % 2);
  }
  ComputeSet cs = g.addComputeSet("cs");
  // Tile 0: 5 vertices of 100 cycles; tile 1: 5 vertices of 10 + 20 * r cycles.
  // Vertex r reads row r (its own tile) and, for r == 3, row 0 too (tile 0 -> tile 1).
  std::vector<unsigned> cycles;
  for (unsigned r = 0; r < 10; ++r) {
    auto v = g.addVertex(cs, "SumRows");
    std::vector<Tensor> ins{x[r]};
    if (r == 3) ins.push_back(x[0]);
    g.connect(v["ins"], ins);
    g.connect(v["out"], y[r]);
    g.setTileMapping(v, r % 2);
    unsigned c = r % 2 == 0 ? 100 : 10 + 20 * r;
    g.setPerfEstimate(v, c);
    cycles.push_back(c);
  }
  DataStream in = g.addHostToDeviceFIFO("in", FLOAT, 80);
  Sequence prog({Copy(in, x), Execute(cs), Execute(cs)});
  Engine e(g, prog, {{"debug.retainDebugInformation", "true"}});
  e.load(dev);
  std::vector<float> host(80, 1.0f);
  e.connectStream("in", host.data());
  e.run();
  report("cycles", {10}, cycles);
  e.printProfileSummary(std::cout, {{"showExecutionSteps", "true"}});
  return 0;
}
