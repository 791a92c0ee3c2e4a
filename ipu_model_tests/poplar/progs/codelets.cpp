// Runs the vertices of field_codelets.cpp; pytest checks the results.
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
  Sequence prog;
  ComputeSet cs = g.addComputeSet("cs");

  Tensor a = input(g, "a", FLOAT, {3}), b = input(g, "b", FLOAT, {3});
  Tensor s = g.addVariable(FLOAT, {3}, "s");
  g.setTileMapping(s, 2);
  for (unsigned i = 0; i < 3; ++i) {
    auto v = g.addVertex(cs, "ScalarEdges", {{"a", a[i]}, {"b", b[i]}, {"out", s[i]}});
    g.setInitialValue(v["k"], i + 2);
    g.setTileMapping(v, i);
  }
  g.createHostRead("s", s);

  Tensor xi = input(g, "xi", INT, {7});
  auto vi = g.addVertex(cs, "InOutInts");
  g.connect(vi["x"], xi);
  g.setInitialValue(vi["add"], std::vector<int>{10, -20, 30});
  g.setTileMapping(vi, 0);
  g.createHostRead("xi_out", xi);

  Tensor m = input(g, "m", FLOAT, {4, 6});
  Tensor rows = g.addVariable(FLOAT, {6}, "rows");
  g.setTileMapping(rows, 3);
  auto vs = g.addVertex(cs, "SumRows");
  g.connect(vs["ins"], m.transpose().transpose()); // one entry per row of m
  g.connect(vs["out"], rows);
  g.setTileMapping(vs, 3);
  g.createHostRead("rows", rows);

  Tensor l = input(g, "l", FLOAT, {10});
  Tensor lmax = g.addVariable(FLOAT, {3}, "lmax");
  g.setTileMapping(lmax, 1);
  auto vl = g.addVertex(cs, "ListMax");
  g.setFieldSize(vl["in"], 3);
  g.connect(vl["in"][0], l.slice(0, 2));
  g.connect(vl["in"][1], l.slice(2, 7));
  g.connect(vl["in"][2], l.slice(7, 10).reverse(0));
  g.connect(vl["out"], lmax);
  g.setTileMapping(vl, 1);
  g.createHostRead("lmax", lmax);

  Tensor hx = input(g, "hx", HALF, {5});
  Tensor hy = g.addVariable(HALF, {5}, "hy");
  g.setTileMapping(hy, 0);
  auto vh = g.addVertex(cs, "HalfAffine", {{"x", hx}, {"y", hy}});
  g.setTileMapping(vh, 0);
  g.createHostRead("hy", hy);

  Tensor w = input(g, "w", FLOAT, {15});
  Tensor w2 = g.addVariable(FLOAT, {15}, "w2");
  Tensor ran = g.addVariable(UNSIGNED_INT, {6}, "ran");
  g.setTileMapping(w2, 2);
  g.setTileMapping(ran, 2);
  auto vw = g.addVertex(cs, "Workers", {{"in", w}, {"out", w2}, {"ran", ran}});
  g.setTileMapping(vw, 2);
  g.setPerfEstimate(vw, 10);
  g.createHostRead("w2", w2);
  g.createHostRead("ran", ran);

  Tensor sf = input(g, "sf", FLOAT, {4}), si = input(g, "si", INT, {4});
  Tensor sfo = g.addVariable(FLOAT, {4}, "sfo"), sio = g.addVariable(INT, {4}, "sio");
  g.setTileMapping(sfo, 1);
  g.setTileMapping(sio, 1);
  auto vt1 = g.addVertex(cs, "Scale<float>", {{"in", sf}, {"out", sfo}});
  g.setInitialValue(vt1["factor"], 2.5f);
  auto vt2 = g.addVertex(cs, "Scale<int>", {{"in", si}, {"out", sio}});
  g.setInitialValue(vt2["factor"], -3);
  g.setTileMapping(vt1, 1);
  g.setTileMapping(vt2, 1);
  g.createHostRead("sfo", sfo);
  g.createHostRead("sio", sio);

  Tensor ng = input(g, "ng", FLOAT, {2, 3});
  ComputeSet cs2 = g.addComputeSet("cs2");
  auto vn = g.addVertex(cs2, "mylib::Negate", {{"x", ng.transpose()}});
  g.setTileMapping(vn, 0);
  g.createHostRead("ng_out", ng);

  prog.add(Execute(cs));
  prog.add(Execute(cs2));
  prog.add(Execute(cs2)); // negating twice gives the input back...
  prog.add(Execute(cs2)); // ...and three times its negation
  Engine e(g, prog);
  e.load(dev);
  auto put = [&](const char *name, const Tensor &t, std::vector<float> v) {
    e.writeTensor(name, v.data(), v.data() + v.size());
    report(std::string("in_") + name, t.shape(), v);
  };
  put("a", a, {1.5f, -2, 3});
  put("b", b, {0.25f, 4, -1});
  std::vector<int> hxi = {1, 2, 3, 4, 5, 6, 7};
  e.writeTensor("xi", hxi.data(), hxi.data() + hxi.size());
  put("m", m, ramp(24));
  put("l", l, ramp(10, 1.25f, -4));
  std::vector<float> hxf = {-2.0f, 0.1f, 1000.3f, 3.14159f, 65504.0f};
  std::vector<half> hxh(hxf.begin(), hxf.end());
  e.writeTensor("hx", hxh.data(), hxh.data() + hxh.size());
  report("in_hx", {5}, hxf);
  put("w", w, ramp(15));
  put("sf", sf, {1, 2, 3, 4.5f});
  std::vector<int> hsi = {1, -2, 3, 7};
  e.writeTensor("si", hsi.data(), hsi.data() + hsi.size());
  put("ng", ng, {1, 2, 3, 4, 5, 6});
  e.run();
  auto get = [&](const char *name, std::size_t n) {
    std::vector<float> v(n);
    e.readTensor(name, v.data(), v.data() + n);
    report(name, {n}, v);
  };
  get("s", 3);
  std::vector<int> xo(7);
  e.readTensor("xi_out", xo.data(), xo.data() + 7);
  report("xi_out", {7}, xo);
  get("rows", 6);
  get("lmax", 3);
  std::vector<half> hyo(5);
  e.readTensor("hy", hyo.data(), hyo.data() + 5);
  std::vector<float> hyf(hyo.begin(), hyo.end());
  report("hy", {5}, hyf);
  std::vector<std::uint16_t> bits(5);
  for (int i = 0; i < 5; ++i) bits[i] = hyo[i].bits();
  report("hy_bits", {5}, bits);
  get("w2", 15);
  std::vector<unsigned> r(6);
  e.readTensor("ran", r.data(), r.data() + 6);
  report("ran", {6}, r);
  get("sfo", 4);
  std::vector<int> sio_h(4);
  e.readTensor("sio", sio_h.data(), sio_h.data() + 4);
  report("sio", {4}, sio_h);
  get("ng_out", 6);
  std::ostringstream prof;
  e.printProfileSummary(prof);
  std::cout << "@profile_has_memory " << (prof.str().find("Memory Usage:") != std::string::npos) << "\n";
  return 0;
}
