// PopLibs subset: results are checked against NumPy by pytest.
#include "report.hpp"
#include <poplin/MatMul.hpp>
#include <poplin/codelets.hpp>
#include <popnn/LogSoftmax.hpp>
#include <popnn/Loss.hpp>
#include <popnn/NonLinearity.hpp>
#include <popnn/codelets.hpp>
#include <popops/Cast.hpp>
#include <popops/DynamicSlice.hpp>
#include <popops/ElementWise.hpp>
#include <popops/Fill.hpp>
#include <popops/Reduce.hpp>
#include <popops/ScaledAdd.hpp>
#include <popops/Zero.hpp>
#include <popops/codelets.hpp>
#include <poprand/RandomGen.hpp>
#include <poprand/codelets.hpp>
#include <poputil/Broadcast.hpp>
#include <poputil/TileMapping.hpp>

using namespace poplar;
using namespace poplar::program;
namespace pe = popops::expr;

int main() {
  IPUModel model;
  model.tilesPerIPU = 16;
  Device dev = model.createDevice();
  Graph g(dev.getTarget());
  popops::addCodelets(g);
  poplin::addCodelets(g);
  popnn::addCodelets(g);
  poprand::addCodelets(g);
  Sequence prog;
  std::vector<std::pair<std::string, Tensor>> outs;
  auto in = [&](const std::string &n, Type t, std::vector<std::size_t> s) {
    Tensor x = g.addVariable(t, s, n);
    poputil::mapTensorLinearly(g, x);
    g.createHostWrite(n, x);
    return x;
  };
  auto out = [&](const std::string &n, Tensor t) { outs.push_back({n, t}); g.createHostRead(n, t); };

  Tensor a = in("a", FLOAT, {6, 8}), b = in("b", FLOAT, {8}), c = in("c", FLOAT, {6, 1});
  out("add_bcast", popops::add(g, a, b, prog));
  out("sub_col", popops::sub(g, a, c, prog));
  out("mul", popops::mul(g, a, a, prog));
  out("div_scalar", popops::div(g, a, 4.0f, prog));
  out("max", popops::max(g, a, c, prog));
  out("exp", popops::exp(g, c, prog));
  out("tanh", popops::tanh(g, a, prog));
  out("sigmoid", popops::sigmoid(g, a, prog));
  out("abs_neg", popops::neg(g, popops::abs(g, a, prog), prog));
  out("map_expr", popops::map(g, pe::Select(pe::_1 * pe::_1 - 2 * pe::_2, pe::Const(-1.0f), pe::_1 > pe::_2), {a, b}, prog));
  out("gt", popops::cast(g, popops::gt(g, a, b, prog), FLOAT, prog));
  Tensor a2 = g.clone(a, "a2");
  prog.add(Copy(a, a2));
  popops::scaledAddTo(g, a2, popops::mul(g, a, 2.0f, prog), -0.25f, prog);
  out("scaledAddTo", a2);
  out("reduce_add_0", popops::reduce(g, a, FLOAT, {0}, popops::ReduceParams(popops::Operation::ADD), prog));
  out("reduce_max_1", popops::reduce(g, a, FLOAT, {1}, popops::ReduceParams(popops::Operation::MAX), prog));
  out("reduce_sq_all", popops::reduce(g, a, FLOAT, {0, 1}, popops::ReduceParams(popops::Operation::SQUARE_ADD), prog));
  Tensor r3 = in("r3", FLOAT, {2, 3, 4});
  out("reduce_mul_02", popops::reduce(g, r3, FLOAT, {0, 2}, popops::ReduceParams(popops::Operation::MUL), prog));
  Tensor upd = g.addVariable(FLOAT, {3}, "upd");
  poputil::mapTensorLinearly(g, upd);
  popops::fill(g, upd, 10.0, prog);
  popops::reduceWithOutput(g, r3, upd, {0, 2}, popops::ReduceParams(popops::Operation::ADD, 0.5f, true), prog);
  out("reduce_update_scaled", upd);
  // Reductions whose groups span tiles (three elements a tile, round the
  // 16 tiles): PopLibs' two stages, partials on the input tiles.
  Tensor rs = g.addVariable(FLOAT, {4, 10}, "rs");
  for (unsigned i = 0; i < 40; i += 3) g.setTileMapping(rs.flatten().slice(i, std::min(i + 3, 40u)), (i / 3 * 5) % 16);
  g.createHostWrite("rs", rs);
  out("split_add_0", popops::reduce(g, rs, FLOAT, {0}, popops::ReduceParams(popops::Operation::ADD), prog));
  out("split_sqadd_1", popops::reduce(g, rs, FLOAT, {1}, popops::ReduceParams(popops::Operation::SQUARE_ADD), prog));
  out("split_max_all", popops::reduce(g, rs, FLOAT, {0, 1}, popops::ReduceParams(popops::Operation::MAX), prog));
  Tensor supd = g.addVariable(FLOAT, {10}, "supd");
  g.setTileMapping(supd, 15);
  popops::fill(g, supd, 3.0, prog);
  popops::reduceWithOutput(g, rs, supd, {0}, popops::ReduceParams(popops::Operation::ADD, 0.5f, true), prog);
  out("split_update_scaled", supd);
  out("split_half_add_1", popops::reduce(g, popops::cast(g, rs, HALF, prog), FLOAT, {1},
                                         popops::ReduceParams(popops::Operation::ADD), prog));
  Tensor z = g.clone(a, "z");
  popops::zero(g, z, prog);
  out("zero", z);
  Tensor filled = g.clone(INT, a, "filled");
  popops::fill(g, filled, prog, -7, "fill_documented_order");  // PopLibs' (graph, t, prog, value)
  out("fill_int", popops::cast(g, filled, FLOAT, prog));
  Tensor h = popops::cast(g, a, HALF, prog);
  out("cast_half", popops::cast(g, h, FLOAT, prog));
  out("cast_int", popops::cast(g, popops::cast(g, a, INT, prog), FLOAT, prog));
  Tensor off = in("off", UNSIGNED_INT, {2});
  out("dyn_slice", popops::dynamicSlice(g, a, off, {0, 1}, {2, 3}, prog));
  Tensor base = g.clone(a, "base");
  prog.add(Copy(a, base));
  Tensor nines = g.addConstant<float>(FLOAT, {2, 3}, {9, 9, 9, 9, 9, 9});
  g.setTileMapping(nines, 5);
  popops::dynamicUpdate(g, base, nines, off, {0, 1}, {2, 3}, prog);
  out("dyn_update", base);
  Tensor m1 = in("m1", FLOAT, {5, 7}), m2 = in("m2", FLOAT, {7, 9});
  out("matmul", poplin::matMul(g, m1, m2, prog));
  out("matmul_tt", poplin::matMul(g, m2.transpose(), m1.transpose(), prog));
  Tensor lhs = poplin::createMatMulInputLHS(g, FLOAT, {5, 7}, {7, 9}, "lhs");
  prog.add(Copy(m1, lhs));
  out("matmul_lhs", poplin::matMul(g, lhs, m2, prog));
  out("relu", popnn::nonLinearity(g, popnn::NonLinearityType::RELU, a, prog));
  out("softmax", popnn::nonLinearity(g, popnn::NonLinearityType::SOFTMAX, a, prog));
  out("logsoftmax", popnn::logSoftmax(g, a, prog));
  Tensor probs = popnn::nonLinearity(g, popnn::NonLinearityType::SOFTMAX, a, prog);
  Tensor labels = in("labels", UNSIGNED_INT, {6});
  Tensor loss = g.addVariable(FLOAT, {6}, "loss"), deltas = g.clone(a, "deltas");
  Tensor correct = g.addVariable(UNSIGNED_INT, {1}, "correct");
  poputil::mapTensorLinearly(g, loss);
  poputil::mapTensorLinearly(g, correct);
  popops::zero(g, correct, prog);
  prog.add(popnn::calcLoss(g, probs, labels, loss, deltas, correct, popnn::CROSS_ENTROPY_LOSS));
  out("loss", loss);
  out("deltas", deltas);
  out("correct", popops::cast(g, correct, FLOAT, prog));
  Tensor ref = g.addVariable(FLOAT, {4000}, "ref");
  poputil::mapTensorLinearly(g, ref);
  out("uniform", poprand::uniform(g, nullptr, 1, ref, FLOAT, -2.0, 3.0, prog));
  out("normal", poprand::normal(g, nullptr, 2, ref, FLOAT, 1.0, 2.0, prog));
  out("bernoulli", poprand::bernoulli(g, nullptr, 3, ref, FLOAT, 0.25, prog));
  Tensor bx = b, by = c;
  poputil::broadcastToMatch(bx, by);
  std::cout << "@broadcastToMatch " << bx.shapeToString() << " " << by.shapeToString() << "\n";

  Engine e(g, prog);
  e.load(dev);
  auto put = [&](const std::string &n, const Tensor &t, std::vector<float> v) {
    e.writeTensor(n, v.data(), v.data() + v.size());
    report("in_" + n, t.shape(), v);
  };
  put("a", a, ramp(48, 0.37f, -4));
  put("b", b, ramp(8, 0.5f, -1));
  put("c", c, ramp(6, 0.25f, -0.5f));
  put("r3", r3, ramp(24, 0.1f, 0.3f));
  put("rs", rs, ramp(40, 0.173f, -3.1f));
  put("m1", m1, ramp(35, 0.3f, -2));
  put("m2", m2, ramp(63, 0.2f, -1));
  std::vector<unsigned> hoff = {3, 4}, hlab = {0, 7, 3, 3, 5, 1};
  e.writeTensor("off", hoff.data(), hoff.data() + 2);
  report("in_off", {2}, hoff);
  e.writeTensor("labels", hlab.data(), hlab.data() + 6);
  report("in_labels", {6}, hlab);
  e.run();
  for (auto &o : outs) {
    std::vector<float> v(o.second.numElements());
    e.readTensor(o.first, v.data(), v.data() + v.size());
    report(o.first, o.second.shape(), v);
  }
  e.run(); // random tensors differ between runs
  std::vector<float> u2(4000);
  e.readTensor("uniform", u2.data(), u2.data() + u2.size());
  report("uniform_run2", {4000}, u2);
  return 0;
}
