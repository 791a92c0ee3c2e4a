// The IPU model: matmul and convolution plans on the AMP unit (amp.cpp).
#include "state.hpp"

#include <algorithm>
#include <cmath>

namespace ipuxl {
namespace model {

// Values v in [1, x] giving distinct ceil(x / v), thinned to at most `keep`.
std::vector<int64_t> Model::splits(int64_t x, int64_t cap, size_t keep) {
  std::vector<int64_t> v;
  x = std::max<int64_t>(1, x);
  int64_t last = -1;
  for (int64_t q = 1; q <= x && q <= cap;) {
    int64_t s = ceil_div(x, q);
    if (s != last) {
      v.push_back(q);
      last = s;
    }
    // next q giving a smaller ceil(x/q)
    if (s <= 1) break;
    int64_t nq = ceil_div(x, s - 1);
    q = std::max(q + 1, nq);
  }
  if (v.size() > keep && keep >= 2) {
    std::vector<int64_t> thin;
    for (size_t i = 0; i < keep; ++i) thin.push_back(v[i * (v.size() - 1) / (keep - 1)]);
    thin.erase(std::unique(thin.begin(), thin.end()), thin.end());
    v = thin;
  }
  return v;
}

// Operands the plan lays out are spread over all its tiles (poplin maps
// each piece over the tiles that use it): with pn == 1 (A) or pm == 1 (B)
// each tile holds its own piece, else every tile of the row / column
// receives the whole piece but the share it holds itself. The AMP vertex
// reads its window from the tile's own memory, so Poplar exchanges the
// regions held on other tiles into the tile before the compute set and
// connects those it holds in place; an operand in another layout is
// copied into the plan's (cost_amp) and its pieces received whole.
void Model::place_operands(Plan& p, bool a_held, bool b_held) const {
  p.a_t = a_held && p.pn == 1 ? 0 : a_held ? p.a_piece_t - p.a_piece_t / p.pn : p.a_piece_t;
  p.b_t = b_held && p.pm == 1 && p.ps == 1 ? 0
          : b_held && p.ps == 1            ? p.b_resident_t - p.b_resident_t / p.pm
                                           : p.b_resident_t;
  // poplin's ExchangeEstimator: the output-channel groups are the
  // innermost tile dimension, so the tiles receiving the same piece of A
  // are neighbours and share a bus (twice the rate) only when the column
  // split is a multiple of the tiles per bus; B's pieces move at the
  // plain rate.
  const int64_t a_share = p.pn % t_.tiles_per_shared_exchange_bus == 0 ? 2 : 1;
  p.exch_in = t_.sync_internal_cycles * p.ps +
              ceil_div(p.a_t, t_.exchange_bytes_per_cycle * a_share) +
              p.ps * ceil_div(p.b_t, t_.exchange_bytes_per_cycle);
}

// A poplin-like plan: the output's rows (M), columns (N, in groups of the
// AMP's output channels) and the contraction (K, in groups of its input
// channels) split over tiles; the plan with the fewest estimated cycles
// whose temporaries fit the available memory proportion of a tile wins
// (poplin's planner minimises cycles under a memory constraint).
Plan Model::plan_matmul(int64_t G, bool grouped, int64_t M, int64_t K, int64_t N, DType dt, int64_t tiles, bool a_resident, bool b_resident, double amp, int64_t a_reuse, int64_t b_reuse, bool half_partials) {
  const bool half = dt == DType::Float16;
  const int64_t es = (int64_t)dtype_size(dt);
  // poplin's partialsType: float inputs keep float partials (no AMP units
  // take float in and half out, so poplin plans float partials); otherwise
  // half partials are 2 bytes per partial sum and use the fp16-in/fp16-out
  // conv units.
  const bool hp = half_partials && dt != DType::Float32;
  const int64_t pb = hp ? 2 : 4;
  const int64_t outG = half ? (hp ? t_.amp_out_fp16 : t_.amp_out_fp16_fp32) : t_.amp_out_fp32;
  const int64_t inG = half ? t_.amp_in_fp16 : t_.amp_in_fp32;
  const int64_t ec = half ? t_.amp_elem_cycles_fp16 : t_.amp_elem_cycles_fp32;
  const int64_t ng = ceil_div(N, outG), kg = ceil_div(K, inG);
  const double budget = t_.unlimited() ? 1e300 : amp * (double)t_.bytes_per_tile;
  std::vector<int64_t> cg = grouped ? splits(G, tiles) : std::vector<int64_t>{1};
  std::vector<int64_t> cm = splits(grouped ? M : G * M, tiles), cn = splits(ng, tiles),
                       ck = splits(kg, tiles);
  const int64_t rows_all = grouped ? M : G * M;
  Plan best, small;
  bool have = false, have_small = false;
  double small_mem = 1e300;
  const int64_t wload = outG * inG * es / 8;
  // One candidate: pg x pm x pn x pk tiles, the columns in ps serial
  // steps (poplin's serial output-channel split: the same tiles compute
  // one column block after the other, so B's pieces, the partials and
  // their reduction buffers are a block's).
  auto consider = [&](int64_t pg, int64_t pm, int64_t pn, int64_t pk, int64_t ps) {
    Plan p;
    p.pg = pg, p.pm = pm, p.pn = pn, p.pk = pk, p.ps = ps;
    const int64_t g = grouped ? ceil_div(G, pg) : 1;
    const int64_t m = ceil_div(rows_all, pm);
    const int64_t n_groups = ceil_div(ceil_div(ng, pn), ps);  // output-channel groups per step
    const int64_t n = std::min(N, n_groups * outG);
    const int64_t k = std::min(K, ceil_div(kg, pk) * inG);
    const int64_t passes = ps * g * n_groups * ceil_div(k, inG);
    const int64_t nw = ceil_div(m, t_.workers);
    // ConvPartial1x1Out worker cycles (§3.1): fp32 46 + (n-3)*8,
    // fp16 34 + (n-3)*4 for n >= 3; nx1 figures below that.
    int64_t wc;
    if (nw >= 3) wc = (half ? 34 : 46) + (nw - 3) * ec;
    else if (nw == 2) wc = half ? 33 : 44;
    else wc = half ? 29 : 33;
    p.compute = 50 + passes * (t_.workers * wc + wload + 15);
    p.a_piece_t = ceil_div(g * m * k * es, a_reuse);
    p.b_resident_t = ceil_div(g * k * n * es, b_reuse);
    const int64_t a_resident_t = p.a_piece_t;
    place_operands(p, a_resident, b_resident);
    const int64_t used = p.tiles();
    if (pk > 1) {
      const int64_t E = G * M * N;
      const int64_t e_t = ceil_div(ceil_div(E, used), ps);
      p.partial_t = g * m * n * pb;
      p.recv_t = e_t * pk * pb;
      p.exch_out = ps * (t_.sync_internal_cycles +
                         ceil_div(std::max(p.partial_t, p.recv_t), t_.exchange_bytes_per_cycle));
      p.reduce = ps * ew_cycles(e_t * pk, pb, 20, 2, 0);
    }
    // B's share resident on each tile counts against the budget, as it did
    // for its piece before it was spread. The operand pieces and partials
    // live while the compute set runs; the received partials while the
    // reduction runs, after the pieces are dead: poplin's totalTempBytes is
    // the larger of its convTempBytes and reduceTempBytes, not their sum.
    const double mem = (double)(std::max(p.a_t + p.b_t + p.partial_t, p.recv_t) +
                                (b_resident ? ceil_div(p.b_resident_t, pm) : 0) +
                                (a_resident ? ceil_div(a_resident_t, pn) : 0));
    if (mem <= budget) {
      if (!have || p.cycles() < best.cycles() ||
          (p.cycles() == best.cycles() && used < best.tiles())) {
        best = p;
        have = true;
      }
    } else if (!have_small || mem < small_mem) {
      small = p;
      small_mem = mem;
      have_small = true;
    }
  };
  // Serial steps only when no parallel plan fits (poplin adds them under
  // memory pressure), doubling up to one output-channel group per step.
  for (int64_t ps = 1; ps == 1 || (!have && ps <= ng); ps *= 2)
    for (int64_t pg : cg)
      for (int64_t pm : cm)
        for (int64_t pn : cn) {
          if (pg * pm * pn > tiles || ceil_div(ng, pn) < ps) continue;
          for (int64_t pk : ck) {
            if (pg * pm * pn * pk > tiles) continue;
            consider(pg, pm, pn, pk, ps);
          }
        }
  // poplin's planner searches every split; the grid above is thinned, so
  // the best plan is refined over the splits between its grid neighbours,
  // one dimension at a time.
  auto between = [&](int64_t x, const std::vector<int64_t>& grid, int64_t v) {
    std::vector<int64_t> out;
    if (grid.size() < 2) return out;
    auto it = std::lower_bound(grid.begin(), grid.end(), v);
    const int64_t lo = it == grid.begin() ? v : *(it - 1);
    const int64_t hi = (it == grid.end() || it + 1 == grid.end()) ? v : *(it + 1);
    for (int64_t q : splits(x, tiles, (size_t)-1))
      if (q > lo && q < hi && q != v) out.push_back(q);
    return out;
  };
  for (int round = 0; have && round < 2; ++round) {
    const Plan b = best;
    auto fits = [&](int64_t pg, int64_t pm, int64_t pn, int64_t pk) {
      return pg * pm * pn * pk <= tiles && ceil_div(ng, pn) >= b.ps;
    };
    for (int64_t q : between(rows_all, cm, b.pm))
      if (fits(b.pg, q, b.pn, b.pk)) consider(b.pg, q, b.pn, b.pk, b.ps);
    for (int64_t q : between(ng, cn, b.pn))
      if (fits(b.pg, b.pm, q, b.pk)) consider(b.pg, b.pm, q, b.pk, b.ps);
    for (int64_t q : between(kg, ck, b.pk))
      if (fits(b.pg, b.pm, b.pn, q)) consider(b.pg, b.pm, b.pn, q, b.ps);
    if (grouped)
      for (int64_t q : between(G, cg, b.pg))
        if (fits(q, b.pm, b.pn, b.pk)) consider(q, b.pm, b.pn, b.pk, b.ps);
  }
  (void)K;
  Plan p = have ? best : small;
  // Vertex state: the AMP vertex's worklists (a pointer per input- and
  // output-channel group, one entry per worker) and, when K is split,
  // the partials' reduction vertex (§5.5 form).
  const int64_t g = grouped ? ceil_div(G, p.pg) : 1;
  const int64_t n = std::min(N, ceil_div(ceil_div(ng, p.pn), p.ps) * outG);
  const int64_t k = std::min(K, ceil_div(kg, p.pk) * inG);
  p.state = 32 + 4 * g * (ceil_div(k, inG) + ceil_div(n, outG)) + 4 * t_.workers + (p.pk > 1 ? 32 : 0);
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
  c.vtypes.push_back(vtype(vertex + dn + "," + pn + ">", A.dtype == DType::Float16 ? 1200 : 1400));
  if (p.pk > 1) c.vtypes.push_back(vtype("popops::ReduceAdd<" + pn + "," + dn + ">", 600));
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
