// Control programs, streams, remote buffers, host I/O, functions,
// compileGraph and several programs in one engine.
#include "report.hpp"
#include <poplar/StreamCallback.hpp>
#include <popops/ElementWise.hpp>
#include <popops/codelets.hpp>

using namespace poplar;
using namespace poplar::program;
namespace pe = popops::expr;

class Counter : public StreamCallback {
public:
  Result prefetch(void *p) override { ++prefetches; fill(p); return Result::Success; }
  void fetch(void *p) override { ++fetches; fill(p); }
  void complete() override { ++completes; }
  void fill(void *p) { static_cast<float *>(p)[0] = static_cast<float>(next++); static_cast<float *>(p)[1] = -1; }
  int next = 0, prefetches = 0, fetches = 0, completes = 0;
};

int main() {
  IPUModel model;
  model.tilesPerIPU = 4;
  Device dev = model.createDevice();
  Graph g(dev.getTarget());
  popops::addCodelets(g);
  auto C = [&](Tensor t) { g.setTileMapping(t, 0); return t; };

  // Repeat and RepeatWhileTrue/False: a counter incremented until it reaches a limit.
  Tensor i = g.addVariable(INT, {}, "i");
  Tensor limit = g.addConstant<int>(INT, {}, 7);
  Tensor acc = g.addVariable(FLOAT, {3}, "acc");
  g.setTileMapping(i, 0);
  g.setTileMapping(limit, 0);
  g.setTileMapping(acc, 1);
  Sequence init({Copy(C(g.addConstant<int>(INT, {}, 0)), i), Copy(C(g.addConstant<float>(FLOAT, {3}, {0, 0, 0})), acc)});
  Sequence cond;
  Tensor pred = popops::lt(g, i, limit, cond);
  Sequence body;
  popops::addInPlace(g, i, C(g.addConstant<int>(INT, {}, 1)), body);
  popops::addInPlace(g, acc, C(g.addConstant<float>(FLOAT, {3}, {1, 2, 3})), body);
  Sequence whileTrue({init, RepeatWhileTrue(cond, pred, body)});
  Sequence condF;
  Tensor predF = popops::gteq(g, i, limit, condF);
  Sequence whileFalse({init, RepeatWhileFalse(condF, predF, body)});
  Sequence repeat({init, Repeat(5, body)});

  // If and Switch on a value written from the host.
  Tensor sel = g.addVariable(INT, {}, "sel");
  g.setTileMapping(sel, 2);
  g.createHostWrite("sel", sel);
  Tensor out = g.addVariable(FLOAT, {2}, "out");
  g.setTileMapping(out, 2);
  g.createHostRead("out", out);
  auto setOut = [&](float a, float b) { return Copy(C(g.addConstant<float>(FLOAT, {2}, {a, b})), out); };
  Sequence ifProg({If(sel, setOut(1, 1), setOut(-1, -1))});
  Switch sw(sel, setOut(99, 99));
  sw.add(0, setOut(0, 10)).add(3, setOut(3, 30)).add(-2, setOut(-2, -20));
  Sequence switchProg({sw});

  // A Function scaling a variable `name` (host write `name`, read `name_out`) in place.
  auto scalingFunction = [&](const std::string &name, std::size_t n, unsigned tile, float factor) -> Function {
    Tensor v = g.addVariable(FLOAT, {n}, name);
    g.setTileMapping(v, tile);
    g.createHostWrite(name, v);
    g.createHostRead(name + "_out", v);
    Sequence body;
    popops::mulInPlace(g, v, factor, body);
    return g.addFunction(body);
  };
  // A function called twice: doubles `fx`.
  Function f = scalingFunction("fx", 4, 3, 2.0f);
  Sequence calls({Call(f), Call(f), Sync(SyncType::INTERNAL), WriteUndef(C(g.addVariable(FLOAT, {1}, "undef")))});
  g.setTileMapping(g.getTopLevelGraph().addVariable(FLOAT, {1}, "unused"), 0);

  // Streams: a FIFO over a circular host buffer, a callback, a StreamCallback.
  Tensor sv = g.addVariable(FLOAT, {2}, "sv");
  g.setTileMapping(sv, 0);
  DataStream in = g.addHostToDeviceFIFO("in", FLOAT, 2);
  DataStream outS = g.addDeviceToHostFIFO("outS", FLOAT, 2);
  DataStream cbIn = g.addHostToDeviceFIFO("cbIn", FLOAT, 2);
  DataStream cbOut = g.addDeviceToHostFIFO("cbOut", FLOAT, 2);
  Sequence streams({Repeat(3, Sequence({Copy(in, sv), Copy(sv, outS)})), Copy(cbIn, sv), Copy(sv, cbOut)});

  // Remote buffer: write rows 0..2, read them back reversed via an offset tensor.
  RemoteBuffer rb = g.addRemoteBuffer("rb", FLOAT, 2, 3);
  Tensor row = g.addVariable(UNSIGNED_INT, {1}, "row");
  g.setTileMapping(row, 0);
  g.createHostWrite("row", row);
  Tensor rv = g.addVariable(FLOAT, {2}, "rv");
  g.setTileMapping(rv, 1);
  g.createHostWrite("rv", rv);
  g.createHostRead("rv_out", rv);
  Sequence toRemote({Copy(rv, rb, row)});
  Sequence fromRemote({Copy(rb, rv, row)});

  Tensor pt = g.addConstant<float>(FLOAT, {2, 2}, {1.5f, -2, 3, 4});
  g.setTileMapping(pt, 0);
  Tensor pti = g.addConstant<int>(INT, {20}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19});
  g.setTileMapping(pti, 0);
  Sequence print;
  Tensor pb = popops::gt(g, pt, 0.0f, print);
  print.add(PrintTensor("pt", pt));
  print.add(PrintTensor("pti", pti));
  print.add(PrintTensor("pb", pb));

  // A function whose code lives in a FunctionBuffer (PopART's RemoteCodeLoadOpx):
  // loaded once, then called in this run and the next.
  Function fb = scalingFunction("bx", 2, 1, 3.0f);
  FunctionBuffer fbuf = g.addFunctionBuffer(fb, FunctionBufferMappingType::REMOTE);
  Sequence codeLoad({Copy(fbuf, fb), Call(fb)});
  Sequence callLoaded({Call(fb)});

  g.createHostRead("acc", acc);
  std::vector<Program> progs = {whileTrue, whileFalse, repeat, ifProg, switchProg, calls, streams, toRemote, fromRemote, print,
                                codeLoad, callLoaded};
  Executable exe = compileGraph(g, progs);
  Engine e(std::move(exe));
  e.load(dev);
  for (int p = 0; p < 3; ++p) {
    e.run(p);
    std::vector<float> a(3);
    e.readTensor("acc", a.data(), a.data() + 3);
    report("loop" + std::to_string(p), {3}, a);
  }
  auto readOut = [&](const std::string &name) {
    std::vector<float> v(2);
    e.readTensor("out", v.data(), v.data() + 2);
    report(name, {2}, v);
  };
  for (int s : {0, 5}) {
    e.writeTensor("sel", &s, &s + 1);
    e.run(3);
    readOut("if" + std::to_string(s));
  }
  for (int s : {0, 3, -2, 7}) {
    e.writeTensor("sel", &s, &s + 1);
    e.run(4);
    readOut("switch" + std::to_string(s));
  }
  std::vector<float> hfx = {1, -2, 0.5f, 8};
  e.writeTensor("fx", hfx.data(), hfx.data() + 4);
  e.run(5);
  e.readTensor("fx_out", hfx.data(), hfx.data() + 4);
  report("calls", {4}, hfx);
  std::vector<float> ring = {1, 2, 3, 4}, sink(6, 0);
  e.connectStream("in", ring.data(), ring.data() + ring.size());
  e.connectStream("outS", sink.data(), sink.data() + sink.size());
  std::vector<float> cbData;
  auto cb = std::unique_ptr<Counter>(new Counter());
  Counter *counter = cb.get();
  e.connectStreamToCallback("cbIn", std::move(cb));
  e.connectStreamToCallback("cbOut", [&](void *p) {
    cbData.assign(static_cast<float *>(p), static_cast<float *>(p) + 2);
  });
  e.run(6);
  e.run(6);
  report("ring_sink", {6}, sink);
  report("callback", {2}, cbData);
  report("callback_counts", {3}, std::vector<int>{counter->fetches, counter->prefetches, counter->completes});
  for (unsigned r = 0; r < 3; ++r) {
    std::vector<float> v = {static_cast<float>(r), static_cast<float>(10 * r)};
    e.writeTensor("row", &r, &r + 1);
    e.writeTensor("rv", v.data(), v.data() + 2);
    e.run(7);
  }
  std::vector<float> host(2);
  e.copyFromRemoteBuffer("rb", host.data(), 1);
  report("remote_row1_host", {2}, host);
  std::vector<float> put = {-7, -8};
  e.copyToRemoteBuffer(put.data(), "rb", 2);
  std::vector<float> back;
  for (unsigned r = 0; r < 3; ++r) {
    e.writeTensor("row", &r, &r + 1);
    e.run(8);
    std::vector<float> v(2);
    e.readTensor("rv_out", v.data(), v.data() + 2);
    back.insert(back.end(), v.begin(), v.end());
  }
  report("remote_back", {3, 2}, back);
  e.run(9);
  std::vector<float> hbx = {1, -2};
  e.writeTensor("bx", hbx.data(), hbx.data() + 2);
  e.run(10);
  e.run(11); // the code stays loaded
  e.readTensor("bx_out", hbx.data(), hbx.data() + 2);
  report("code_load", {2}, hbx);
  return 0;
}
