// Each case breaks one of Poplar's rules; the program prints the type of
// the exception it caught and its message: `@error <case> <type> | <what>`.
#include "report.hpp"
#include <functional>
#include <map>
#include <poplar/DeviceManager.hpp>
#include <poplin/MatMul.hpp>
#include <poplin/codelets.hpp>
#include <popops/ElementWise.hpp>
#include <popops/codelets.hpp>
#include <poputil/exceptions.hpp>

using namespace poplar;
using namespace poplar::program;

int main(int argc, char **argv) {
  std::string dir = argc > 1 ? argv[1] : ".";
  IPUModel model;
  model.tilesPerIPU = 4;
  Device dev = model.createDevice();
  std::map<std::string, std::function<void()>> cases;
  cases["unmapped"] = [&] {
    Graph g(dev.getTarget());
    Tensor t = g.addVariable(FLOAT, {4}, "lonely");
    g.setTileMapping(t.slice(0, 2), 0);
    Engine e(g, Sequence());
  };
  cases["unconnected"] = [&] {
    Graph g(dev.getTarget());
    g.addCodelets(dir + "/field_codelets.cpp");
    Tensor t = g.addVariable(FLOAT, {3}, "t");
    g.setTileMapping(t, 0);
    ComputeSet cs = g.addComputeSet("cs");
    auto v = g.addVertex(cs, "SumRows");
    g.connect(v["out"], t);
    g.setTileMapping(v, 0);
    Engine e(g, Execute(cs));
  };
  cases["written_twice"] = [&] {
    Graph g(dev.getTarget());
    g.addCodelets(dir + "/field_codelets.cpp");
    Tensor t = g.addVariable(FLOAT, {3}, "t");
    g.setTileMapping(t, 0);
    ComputeSet cs = g.addComputeSet("twice");
    for (int k = 0; k < 2; ++k) {
      auto v = g.addVertex(cs, "HalfAffine");
      (void)v;
    }
    g.setTileMapping(VertexRef(&g, 0), 0);
    ComputeSet cs2 = g.addComputeSet("twice2");
    for (int k = 0; k < 2; ++k) {
      auto v = g.addVertex(cs2, "SumRows");
      g.connect(v["ins"], std::vector<Tensor>{t});
      g.connect(v["out"], t.slice(k, k + 2)); // element 1 written by both vertices
      g.setTileMapping(v, 0);
    }
    Engine e(g, Execute(cs2));
  };
  cases["unknown_vertex"] = [&] {
    Graph g(dev.getTarget());
    g.addVertex(g.addComputeSet(), "NoSuchVertex");
  };
  cases["unknown_field"] = [&] {
    Graph g(dev.getTarget());
    g.addCodelets(dir + "/field_codelets.cpp");
    Tensor t = g.addVariable(FLOAT, {3}, "t");
    auto v = g.addVertex(g.addComputeSet(), "SumRows");
    g.connect(v["nope"], t);
  };
  cases["type_mismatch"] = [&] {
    Graph g(dev.getTarget());
    g.addCodelets(dir + "/field_codelets.cpp");
    Tensor t = g.addVariable(INT, {3}, "ints");
    auto v = g.addVertex(g.addComputeSet(), "SumRows");
    g.connect(v["out"], t);
  };
  cases["scalar_edge_size"] = [&] {
    Graph g(dev.getTarget());
    g.addCodelets(dir + "/field_codelets.cpp");
    Tensor t = g.addVariable(FLOAT, {3}, "three");
    auto v = g.addVertex(g.addComputeSet(), "ScalarEdges");
    g.connect(v["a"], t);
  };
  cases["slice_range"] = [&] {
    Graph g(dev.getTarget());
    g.addVariable(FLOAT, {3, 4}, "t").slice(2, 5, 1);
  };
  cases["reshape"] = [&] {
    Graph g(dev.getTarget());
    g.addVariable(FLOAT, {3, 4}, "t").reshape({5, 2});
  };
  cases["copy_size"] = [&] {
    Graph g(dev.getTarget());
    Copy(g.addVariable(FLOAT, {3}, "a"), g.addVariable(FLOAT, {4}, "b"));
  };
  cases["stream_unconnected"] = [&] {
    Graph g(dev.getTarget());
    Tensor t = g.addVariable(FLOAT, {2}, "t");
    g.setTileMapping(t, 0);
    DataStream s = g.addHostToDeviceFIFO("feed", FLOAT, 2);
    Engine e(g, Copy(s, t));
    e.load(dev);
    e.run();
  };
  cases["write_size"] = [&] {
    Graph g(dev.getTarget());
    Tensor t = g.addVariable(FLOAT, {2}, "t");
    g.setTileMapping(t, 0);
    g.createHostWrite("t", t);
    Engine e(g, Sequence());
    e.load(dev);
    float buf[3] = {0, 0, 0};
    e.writeTensor("t", buf, buf + 3);
  };
  cases["run_before_load"] = [&] {
    Graph g(dev.getTarget());
    Engine e(g, Sequence());
    e.run();
  };
  cases["compile_error"] = [&] {
    Graph g(dev.getTarget());
    g.addCodelets(dir + "/broken_codelet.cpp");
  };
  cases["popops_no_codelets"] = [&] {
    Graph g(dev.getTarget());
    Tensor t = g.addVariable(FLOAT, {2}, "t");
    g.setTileMapping(t, 0);
    Sequence s;
    popops::add(g, t, t, s);
  };
  cases["popops_shapes"] = [&] {
    Graph g(dev.getTarget());
    popops::addCodelets(g);
    Tensor a = g.addVariable(FLOAT, {2, 3}, "a"), b = g.addVariable(FLOAT, {4}, "b");
    g.setTileMapping(a, 0);
    g.setTileMapping(b, 0);
    Sequence s;
    popops::add(g, a, b, s);
  };
  cases["matmul_partials_type"] = [&] {
    Graph g(dev.getTarget());
    poplin::addCodelets(g);
    Tensor a = g.addVariable(HALF, {4, 8}, "a"), b = g.addVariable(HALF, {8, 2}, "b");
    g.setTileMapping(a, 0);
    g.setTileMapping(b, 0);
    Sequence s;
    poplin::matMul(g, a, b, s, "mm", {{"partialsType", "double"}});
  };
  cases["if_predicate"] = [&] {
    Graph g(dev.getTarget());
    If(g.addVariable(INT, {2}, "p"), Sequence(), Sequence());
  };
  cases["vertex_false"] = [&] {
    Graph g(dev.getTarget());
    g.addCodelets(dir + "/field_codelets.cpp");
    Tensor t = g.addVariable(FLOAT, {}, "x");
    g.setTileMapping(t, 0);
    ComputeSet cs = g.addComputeSet("fails");
    auto v = g.addVertex(cs, "Fails", {{"x", t}});
    g.setTileMapping(v, 0);
    Engine e(g, Execute(cs));
    e.load(dev);
    e.run();
  };
  cases["other_functions_buffer"] = [&] {
    Graph g(dev.getTarget());
    Function f0 = g.addFunction(Sequence()), f1 = g.addFunction(Sequence());
    FunctionBuffer b0 = g.addFunctionBuffer(f0, FunctionBufferMappingType::REMOTE);
    Copy(b0, f1);
  };
  cases["hardware"] = [&] {
    auto dm = DeviceManager::createDeviceManager();
    auto devices = dm.getDevices(TargetType::IPU, 1);
    std::cout << "@hardware_devices " << devices.size() << "\n";
    dm.getDevice(0);
  };
  cases["tile_range"] = [&] {
    Graph g(dev.getTarget());
    g.setTileMapping(g.addVariable(FLOAT, {2}, "t"), 4);
  };
  cases["engine_options_env"] = [&] {
    Graph g(dev.getTarget());
    Engine e(g, Sequence()); // POPLAR_ENGINE_OPTIONS holds bad JSON in this case
  };
  for (int i = 2; i < argc; ++i) {
    std::string name = argv[i];
    try {
      cases.at(name)();
      std::cout << "@error " << name << " none | no exception\n";
    } catch (const graph_program_compilation_error &e) {
      std::cout << "@error " << name << " " << e.type << " | " << e.what() << "\n@end\n";
    } catch (const poplar_error &e) {
      std::cout << "@error " << name << " " << e.type << " | " << e.what() << "\n";
    } catch (const poputil::poplibs_error &e) {
      std::cout << "@error " << name << " " << e.type << " | " << e.what() << "\n";
    }
  }
  return 0;
}
