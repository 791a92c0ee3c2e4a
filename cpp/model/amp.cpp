// The IPU model: matmul and convolution plans on the AMP unit (amp.cpp).
#include "state.hpp"

#include <algorithm>
#include <cmath>

namespace ipuxl {
namespace model {

std::vector<int64_t> Model::splits(int64_t x, int64_t cap, size_t keep) {
  return plan_splits(x, cap, keep);
}

// matmul_plan.hpp's place_operands with this model's target.
void Model::place_operands(Plan& p, bool a_held, bool b_held) const {
  ipuxl::model::place_operands(t_, p, a_held, b_held);
}

// The plan of matmul_plan.hpp (shared with ipuxl's poplin::matMul), with
// the exchange code of this model's operand layouts.
Plan Model::plan_matmul(int64_t G, bool grouped, int64_t M, int64_t K, int64_t N, DType dt, int64_t tiles, bool a_resident, bool b_resident, double amp, int64_t a_reuse, int64_t b_reuse, bool half_partials) {
  MatMulProblem q;
  q.G = G, q.grouped = grouped, q.M = M, q.K = K, q.N = N;
  q.half = dt == DType::Float16;
  q.es = (int64_t)dtype_size(dt);
  q.tiles = tiles, q.a_resident = a_resident, q.b_resident = b_resident, q.amp = amp;
  q.a_reuse = a_reuse, q.b_reuse = b_reuse;
  // poplin's partialsType: float inputs keep float partials (no AMP units
  // take float in and half out)
  q.half_partials = half_partials && dt != DType::Float32;
  Plan p = ipuxl::model::plan_matmul(t_, q);
  // Exchange code: the program bringing each tile its pieces of A and B
  // (operands laid out otherwise are rearranged first, cost_amp), and
  // when K is split the one sending the partials to their reducing tile
  // (a region from each of the pk tiles). The plan lays a piece out over
  // the tiles that use it (poplin's createInput / createWeights), so a
  // piece used by pn column groups (A) or pm row groups (B) is gathered
  // from that many tiles: a region from each, plus the region each tile
  // sends of its own share.
  const int64_t a_regions = p.a_t > 0 ? p.pn + 1 : 0;
  const int64_t b_regions = p.b_t > 0 ? p.pm + 1 : 0;
  p.xcode = t_.xc_program * p.ps + t_.xc_region * (a_regions + b_regions) +
            (p.pk > 1 ? t_.xc_program + t_.xc_region * (p.pk + 1) : 0);
  return p;
}

void Model::cost_matmul(const OpRecord& op, OpCost& c) {
  if (op.in.size() < 2 || op.in[0] < 0 || op.in[1] < 0 || op.out.empty())
    return cost_elementwise(op, c, false);
  const auto& A = d_.tensors[op.in[0]];
  const auto& B = d_.tensors[op.in[1]];
  const auto& O = d_.tensors[op.out[0]];
  Shape sa = A.shape, sb = B.shape;
  if (sa.size() == 1) sa.insert(sa.begin(), 1);
  if (sb.size() == 1) sb.push_back(1);
  const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  int64_t gb = 1;
  for (size_t i = 0; i + 2 < sb.size(); ++i) gb *= sb[i];
  const int64_t G = std::max<int64_t>(1, O.nelms() / std::max<int64_t>(1, M * N));
  cost_amp(op, c, op.in[0], op.in[1], G, gb > 1, M, K, N, "poplin::ConvPartial1x1Out<", 1, 1);
}

void Model::cost_conv(const OpRecord& op, OpCost& c) {
  if (op.in.size() < 2 || op.in[0] < 0 || op.in[1] < 0 || op.out.empty())
    return cost_elementwise(op, c, false);
  const auto& I0 = d_.tensors[op.in[0]];
  const auto& I1 = d_.tensors[op.in[1]];
  const auto& O = d_.tensors[op.out[0]];
  const bool wgrad = op.cost_class == CostClass::ConvWeightsGrad;
  // The activations-shaped tensors (batch, channels, spatial...) and the
  // weights (out channels, in channels / groups, kernel...).
  const Shape& w = wgrad ? O.shape : I1.shape;
  if (I0.shape.size() < 3 || w.size() != I0.shape.size())
    throw Error("IpuModel: " + std::string(cost_class_name(op.cost_class)) + " op '" + op.name +
                "' expects (N, C, spatial...) tensors and (Cout, Cin/groups, kernel...) weights");
  const int64_t groups = std::max<int64_t>(1, op.attrs.i("groups", 1));
  auto tail = [](const Shape& s, size_t from) {
    int64_t n = 1;
    for (size_t i = from; i < s.size(); ++i) n *= s[i];
    return n;
  };
  const int64_t kern = tail(w, 2), cin_g = w[1], cout_g = std::max<int64_t>(1, w[0] / groups);
  // dy (the forward output) of the gradients, the output of the forward.
  const Shape& y = op.cost_class == CostClass::Conv ? O.shape : I0.shape;
  const int64_t batch = y[0], out_pos = tail(y, 2);
  int64_t M, K, N;
  if (op.cost_class == CostClass::Conv) {
    M = batch * out_pos, K = cin_g * kern, N = cout_g;
  } else if (op.cost_class == CostClass::ConvDataGrad) {
    M = batch * tail(O.shape, 2), K = cout_g * kern, N = cin_g;
  } else {
    M = cout_g, K = batch * out_pos, N = cin_g * kern;
  }
  // The vertex reads each activation once for all the kernel taps it
  // feeds: the activations' piece of a tile is its rows (plus a halo),
  // not the [rows, channels x kernel] matrix of the matmul form.
  const int64_t reuse = std::max<int64_t>(1, kern);
  cost_amp(op, c, op.in[0], op.in[1], groups, groups > 1, M, K, N,
           kern == 1 ? "poplin::ConvPartial1x1Out<" : "poplin::ConvPartialnx1<",
           wgrad ? 1 : reuse, wgrad ? reuse : 1);
  // The convolution's own count (a strided data gradient's matmul form
  // counts the zeros between the strided positions).
  c.flops = 2.0 * (double)batch * (double)(cout_g * groups) * (double)out_pos * (double)cin_g *
            (double)kern;
}

void Model::cost_amp(const OpRecord& op, OpCost& c, int a, int b, int64_t G, bool grouped,
                     int64_t M, int64_t K, int64_t N, const std::string& vertex, int64_t a_reuse,
                     int64_t b_reuse) {
  const auto& A = d_.tensors[a];
  const auto& B = d_.tensors[b];
  const auto& O = d_.tensors[op.out[0]];
  const bool a_res = !mapped(a);
  const bool b_res = !mapped(b);
  const TileMap set = tile_set(op.placement);
  const double amp = op.attrs.has("available_memory_proportion")
                         ? op.attrs.f("available_memory_proportion")
                         : t_.available_memory_proportion;
  // The op's partials type as PopART resolved it when the op was created
  // (PopXL ops.matmul: its partials_type, else partialsTypeMatMuls; float
  // by default), which MatMulOpx passes to poplin as "partialsType".
  const std::string pt = op.attrs.s("partials_type", "float");
  if (pt != "half" && pt != "float")
    throw Error("IpuModel: op '" + op.name + "' has partials_type '" + pt +
                "' (expected 'half' or 'float')");
  const bool half_partials = pt == "half" && A.dtype != DType::Float32;
  char key[256];
  snprintf(key, sizeof key, "%lld,%d,%lld,%lld,%lld,%d,%d,%d,%d,%g,%lld,%lld,%d", (long long)G,
           (int)grouped, (long long)M, (long long)K, (long long)N, (int)A.dtype, set.set_size,
           (int)a_res, (int)b_res, amp, (long long)a_reuse, (long long)b_reuse, (int)half_partials);
  auto it = plans_.find(key);
  if (it == plans_.end())
    it = plans_.emplace(key, plan_matmul(G, grouped, M, K, N, A.dtype, set.set_size, a_res, b_res,
                                         amp, a_reuse, b_reuse, half_partials)).first;
  Plan p = it->second;
  TileMap range = op_range(op.placement, p.tiles());
  const int64_t es = (int64_t)dtype_size(A.dtype);
  // Creator layouts: operands nobody laid out yet are created by the op
  // (PopART InputCreatorType::CanCreate), spread over all the tiles of
  // the plan (poplin's createWeights / createInput map each piece over
  // the tiles that use it, so no tile holds more than its share).
  const TileMap b_plan = spread(range, p.tiles(), B.nelms(), (int64_t)dtype_size(B.dtype));
  const TileMap a_plan = spread(range, p.tiles(), A.nelms(), es);
  // An operand some other op already laid out as this plan would (the
  // same pieces on the same number of tiles) is read in place: poplin
  // rearranges an input into the plan's layout only when it differs
  // ("these copies will be elided if the inputs already use the expected
  // memory layout and tile mapping", poplin/Convolution.cpp), so its
  // tiles receive only the parts of their pieces held elsewhere.
  auto in_layout = [&](int t, const TileMap& plan) {
    const TileMap& src = mapping(t);
    return src.ipu == plan.ipu && src.count == plan.count && src.per_tile == plan.per_tile;
  };
  const bool a_held = a_res || in_layout(a, a_plan);
  const bool b_held = b_res || in_layout(b, b_plan);
  if (a_held != a_res || b_held != b_res) place_operands(p, a_held, b_held);
  if (b_res) set_map(b, b_plan);
  if (a_res) set_map(a, a_plan);
  set_map(op.out[0], spread(range, p.tiles(), O.nelms(), (int64_t)dtype_size(O.dtype)));
  c.tiles = range;
  c.compute = p.compute + p.reduce;
  c.exchange = p.exch_in + p.exch_out;
  // An operand held on another IPU comes over the IPU-Links first.
  for (int t : {a, b})
    if (mapping(t).ipu != op.placement.ipu) {
      Xch x = exchange_in(mapping(t), op.placement.ipu, 1, (int64_t)d_.tensors[t].nbytes());
      c.exchange += x.cycles;
      c.gxcode += x.code;
    }
  c.flops = 2.0 * (double)G * (double)M * (double)N * (double)K;
  const std::string dn = dtype_name(A.dtype);
  const std::string pn = half_partials ? dtype_name(DType::Float16) : "float";
  c.vtypes.push_back(vtype(vertex + dn + "," + pn + ">", conv_partial_code(A.dtype == DType::Float16)));
  if (p.pk > 1) c.vtypes.push_back(vtype("poplin::ReduceAdd<" + dn + "," + pn + ">", reduce_add_code()));
  c.state = p.state;
  c.xcode = p.xcode;
  c.programs = 2 + (p.pk > 1 ? 2 : 0);
  // An operand laid out by someone else (a stream, a slice, another op's
  // output) is first copied into the plan's layout (poplin's
  // pre-arrangement of a convolution's input and weights): one more
  // exchange program, whose code on each receiving tile grows with the
  // contiguous regions its piece is gathered from. A layout some
  // identical plan created (the same pieces, whatever the start tile)
  // needs none.
  // The rearrangement is the same Copy a call site makes into a
  // Function's parameter (copy_cost): exchange code on the sending and
  // the receiving tiles, here carried by the op's tiles.
  auto rearrange = [&](int t, bool created, const TileMap& plan) {
    if (created || plan.count == 0) return;
    if (in_layout(t, plan)) return;
    const TileMap& src = mapping(t);
    const CopyCost cc = copy_cost(src, plan, (int64_t)d_.tensors[t].nbytes());
    if (cc.on_tile || cc.global) return;  // on tile: none; another IPU: gxcode above
    c.xcode += ceil_div(cc.code * (src.count + plan.count), std::max(1, range.count));
    c.programs += 1;
    if (std::find(c.rearranged.begin(), c.rearranged.end(), t) == c.rearranged.end()) {
      c.rearranged.push_back(t);
      c.rearranged_t += plan.max_tile();
      // The operand pieces the compute sets hold (p.a_t, p.b_t) are the
      // copy's bytes, but for B with serial column steps only one step's.
      if (t == b && t != a && p.ps > 1) c.rearranged_hold_t += plan.max_tile();
    }
  };
  rearrange(a, a_res, a_plan);
  rearrange(b, b_res, b_plan);
  // Temporaries at the op's step: the larger of its two phases (the
  // compute set with its operand pieces and partials; the reduction with
  // the partials and the received partials), which are programs one after
  // the other, so the pieces are dead when the partials arrive.
  c.temp = std::max(p.a_t + p.b_t + p.partial_t, p.partial_t + p.recv_t);
  char buf[160];
  snprintf(buf, sizeof buf, "tiles %lld = groups %lld x rows %lld x cols %lld x k %lld%s",
           (long long)p.tiles(), (long long)p.pg, (long long)p.pm, (long long)p.pn,
           (long long)p.pk, p.ps > 1 ? (", cols in " + std::to_string(p.ps) + " serial steps").c_str() : "");
  c.plan = buf;
}

}  // namespace model
}  // namespace ipuxl
