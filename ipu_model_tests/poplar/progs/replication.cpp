// A replicated graph (4 replicas, one IPU each): per-replica variables and
// streams, control flow that differs between replicas, remote buffers and
// gcl collectives over CommGroups. Every result comes back through a
// per-replica device-to-host stream; pytest recomputes them with NumPy.
#include "report.hpp"
#include <gcl/Collectives.hpp>
#include <popops/Cast.hpp>
#include <popops/ElementWise.hpp>
#include <popops/Zero.hpp>
#include <popops/codelets.hpp>
#include <poputil/TileMapping.hpp>
#include <poputil/exceptions.hpp>

using namespace poplar;
using namespace poplar::program;

int main() {
  const unsigned R = 4, N = 6;
  IPUModel model;
  model.numIPUs = R;
  model.tilesPerIPU = 4;
  Device dev = model.createDevice();
  Graph g(dev.getTarget(), replication_factor(R));
  popops::addCodelets(g);
  std::cout << "@replication_factor  : " << g.getReplicationFactor() << "\n";
  std::cout << "@replica_target 2 : " << g.getTarget().getNumIPUs() << " " << g.getTarget().getNumTiles() << "\n";

  Sequence prog;
  std::vector<std::pair<std::string, Tensor>> outs;
  auto out = [&](const std::string &n, Tensor t) { outs.push_back({n, t}); };
  auto var = [&](const std::string &n, Type type, std::vector<std::size_t> shape) {
    Tensor t = g.addVariable(type, shape, n);
    poputil::mapTensorLinearly(g, t);
    return t;
  };

  Tensor w = var("w", FLOAT, {N});
  g.createHostWrite("w", w);
  Tensor x = var("x", FLOAT, {N}), b = var("b", FLOAT, {2}), n = var("n", INT, {});
  DataStream xs = g.addHostToDeviceFIFO("x", FLOAT, N);  // REPLICATE: one stream per replica
  DataStream bs = g.addHostToDeviceFIFO("b", FLOAT, 2, ReplicatedStreamMode::BROADCAST);
  DataStream ns = g.addHostToDeviceFIFO("n", INT, 1);
  prog.add(Copy(xs, x));
  prog.add(Copy(bs, b));
  prog.add(Copy(ns, n));
  Tensor y = popops::add(g, popops::mul(g, x, w, prog), b[0], prog);
  out("y", y);
  Tensor ri = g.addReplicationIndexConstant();
  g.setTileMapping(ri, 0);
  out("replica_index", popops::cast(g, ri, FLOAT, prog).reshape({1}));
  using Op = gcl::CollectiveOperator;
  std::vector<std::pair<std::string, Op>> ops = {{"add", Op::ADD}, {"mean", Op::MEAN},     {"mul", Op::MUL},
                                                 {"min", Op::MIN}, {"max", Op::MAX},       {"square_add", Op::SQUARE_ADD},
                                                 {"local", Op::LOCAL}};
  for (auto &o : ops) out("ar_" + o.first, gcl::allReduceCrossReplica(g, y, o.second, prog));
  gcl::CommGroup cons2(gcl::CommGroupType::CONSECUTIVE, 2), orth2(gcl::CommGroupType::ORTHOGONAL, 2),
      strided2(gcl::CommGroupType::CONSECUTIVE, 2, 2);
  out("ar_cons2", gcl::allReduceCrossReplica(g, y, Op::ADD, prog, cons2));
  out("ar_orth2", gcl::allReduceCrossReplica(g, y, Op::ADD, prog, orth2));
  out("ar_strided2", gcl::allReduceCrossReplica(g, y, Op::ADD, prog, strided2));
  Tensor z = g.clone(y, "z");
  prog.add(Copy(y, z));
  gcl::allReduceInPlaceCrossReplica(g, z, Op::MAX, prog, cons2);
  out("ar_inplace_max_cons2", z);
  out("ag", gcl::allGatherCrossReplica(g, y, prog));
  out("ag_orth2", gcl::allGatherCrossReplica(g, y, prog, orth2));
  out("rs", gcl::reduceScatterCrossReplica(g, y, Op::ADD, prog));
  out("rs_cons2", gcl::reduceScatterCrossReplica(g, y, Op::ADD, prog, cons2));
  out("bcast_root1_cons2", gcl::broadcastCrossReplica(g, y, prog, cons2, 1));

  // Control flow whose decisions differ between replicas: a loop that runs
  // n times (n differs per replica) and an If on the sign of y[0].
  Tensor i = var("i", INT, {}), acc = var("acc", FLOAT, {N}), pred = var("pred", BOOL, {});
  Sequence init, cond, body;
  popops::zero(g, i, init);
  popops::zero(g, acc, init);
  prog.add(init);
  popops::mapWithOutput(g, popops::expr::_1 < popops::expr::_2, {i, n}, pred, cond);
  popops::mapInPlace(g, popops::expr::_1 + 1, {i}, body);
  popops::addInPlace(g, acc, y, body);
  prog.add(RepeatWhileTrue(cond, pred, body));
  out("loop_acc", acc);
  Tensor branch = var("branch", FLOAT, {N});
  Tensor ypos = popops::gt(g, y[0], 0.0f, prog);
  Sequence thenP, elseP;
  thenP.add(Copy(y, branch));
  popops::mulInPlace(g, branch, 10.0f, thenP);
  elseP.add(Copy(y, branch));
  popops::negInPlace(g, branch, elseP);
  prog.add(If(ypos, thenP, elseP));
  // After the branches join, a collective sees every replica again.
  out("branch_sum", gcl::allReduceCrossReplica(g, branch, Op::ADD, prog));

  // Remote buffers are per replica.
  RemoteBuffer rb = g.addRemoteBuffer("rb", FLOAT, 3, 2);
  Tensor fromRemote = var("fromRemote", FLOAT, {3}), row = g.addConstant<unsigned>(UNSIGNED_INT, {}, 1u);
  g.setTileMapping(row, 0);
  prog.add(Copy(rb, fromRemote, row));
  out("remote_row1", fromRemote);

  std::vector<std::vector<float>> results(outs.size() * R);
  for (std::size_t k = 0; k < outs.size(); ++k) {
    DataStream s = g.addDeviceToHostFIFO("out_" + outs[k].first, FLOAT, outs[k].second.numElements());
    prog.add(Copy(outs[k].second, s));
  }

  // Program 1: a collective inside a branch only some replicas take.
  Sequence diverge;
  Sequence onlySome;
  gcl::allReduceCrossReplica(g, y, Op::ADD, onlySome);
  diverge.add(If(ypos, onlySome, Sequence()));
  // Program 2: one all-reduce of 1000 floats, for the IPU model's cost.
  Tensor big = var("big", FLOAT, {1000});
  Sequence one;
  gcl::allReduceInPlaceCrossReplica(g, big, Op::ADD, one);

  // Rules: a group size that does not divide the replicas, a replication
  // factor that does not divide the IPUs.
  int badGroup = 0, badFactor = 0;
  try {
    gcl::allReduceCrossReplica(g, y, Op::ADD, one, gcl::CommGroup(gcl::CommGroupType::CONSECUTIVE, 3));
  } catch (const poputil::poplibs_error &) {
    badGroup = 1;
  }
  try {
    Graph bad(dev.getTarget(), replication_factor(3));
  } catch (const poplar::poplar_error &) {
    badFactor = 1;
  }
  std::cout << "@bad_group  : " << badGroup << "\n@bad_factor  : " << badFactor << "\n";

  Engine e(g, {prog, diverge, one});
  e.load(dev);
  std::vector<float> hw = ramp(N, 0.5f, -1.0f), hb = {0.25f, 99.0f};
  e.writeTensor("w", hw.data(), hw.data() + N);
  report("in_w", {N}, hw);
  report("in_b", {2}, hb);
  std::vector<std::vector<float>> hx(R);
  std::vector<int> hn(R);
  for (unsigned r = 0; r < R; ++r) {
    hx[r] = ramp(N, 0.3f + 0.1f * r, -1.5f + r);
    hn[r] = static_cast<int>(r) + 1;
    e.connectStream("x", r, hx[r].data());
    e.connectStream("n", r, &hn[r]);
    report("in_x_" + std::to_string(r), {N}, hx[r]);
    std::vector<float> rows = {float(r), float(10 + r), float(20 + r), float(100 * r), float(100 * r + 1), float(100 * r + 2)};
    e.copyToRemoteBuffer(rows.data(), "rb", 0, r);
    e.copyToRemoteBuffer(rows.data() + 3, "rb", 1, r);
  }
  report("in_n", {R}, hn);
  e.connectStream("b", hb.data()); // BROADCAST: read once for every replica
  for (std::size_t k = 0; k < outs.size(); ++k)
    for (unsigned r = 0; r < R; ++r) {
      auto &buf = results[k * R + r];
      buf.assign(outs[k].second.numElements(), 0.0f);
      if (k % 2)
        e.connectStream("out_" + outs[k].first, r, buf.data());
      else // the callback overload, per replica
        e.connectStreamToCallback("out_" + outs[k].first, r, [&buf](void *p) {
          std::memcpy(buf.data(), p, buf.size() * sizeof(float));
        });
    }
  e.run(0);
  for (std::size_t k = 0; k < outs.size(); ++k)
    for (unsigned r = 0; r < R; ++r) report(outs[k].first + "_" + std::to_string(r), outs[k].second.shape(), results[k * R + r]);
  try {
    e.run(1);
    std::cout << "@diverge_error  : 0\n";
  } catch (const poplar::runtime_error &err) {
    std::cout << "@diverge_error  : 1\n" << "diverge message: " << err.what() << "\n";
  }
  std::uint64_t before = e.ipuxlTotalCycles();
  e.run(2);
  std::cout << "@allreduce_cycles  : " << (e.ipuxlTotalCycles() - before) << "\n";
  return 0;
}
