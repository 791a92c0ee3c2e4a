// The IPU model: the cost of each op by its cost class (costs.cpp).
#include "state.hpp"

#include <algorithm>
#include <cmath>

namespace ipuxl {
namespace model {

// poplibs elementwise estimators (§3.1, popops PerformanceEstimation):
// a supervisor vertex runs 6 workers, each ceil(n/6) elements, in
// vectors of w (64 bits); the tile interleaves the workers, so tile
// cycles are 6 x worker cycles plus the supervisor overhead.
int64_t Model::ew_cycles(int64_t n, int64_t es, int64_t header, int64_t per_vector, int64_t unroll) const {
  return ew_vertex_cycles(t_, n, es, header, per_vector, unroll);
}

// An elementwise op's figures for its output dtype: its declared cost
// parameters (OpDef.cost), else the defaults of §3.1: UnaryOp1D
// `6·(17 + ⌈n/w⌉·3) + 9 + 11`, BinaryOp1D `6·(29 fp32 | 26 fp16 +
// ⌈⌈N/6⌉/w⌉·3) + 11` (3 cycles per vector for each input beyond the first).
EwShape Model::ew_shape(const OpRecord& op, int n_in, bool half) const {
  const int h = half ? 1 : 0;
  EwShape s{n_in <= 1 ? 17 + 9 : (half ? 26 : 29), n_in <= 1 ? 3 : 3 * std::max(1, n_in - 1), 0};
  if (op.cost.header[h] > 0) s.header = op.cost.header[h];
  if (op.cost.per_vector[h] > 0) s.per_vector = op.cost.per_vector[h];
  if (op.cost.unroll[h] > 0) s.unroll = op.cost.unroll[h];
  return s;
}

void Model::cost_op(int op_id, const OpRecord& op) {
  OpCost& c = cost_[op_id];
  c.reached = true;
  switch (op.kind) {
    case OpKind::Call:
    case OpKind::Repeat:
    case OpKind::If: {
      // Caller tensors unwind through the call: unmapped inputs take the
      // callee parameter's layout, outputs the callee output's.
      const int g0 = op.graphs[0];
      const auto& cg = d_.graphs[g0];
      for (size_t i = 0; i < cg.inputs.size(); ++i) {
        int ct = op.in[op.caller_input(0, i)];
        if (!mapped(ct) && mapped(cg.inputs[i])) set_map(ct, mapping(cg.inputs[i]));
      }
      if (op.kind == OpKind::If) ensure_linear(op.in[0]);
      for (size_t i = 0; i < op.out.size() && i < cg.outputs.size(); ++i)
        if (!mapped(op.out[i]) && mapped(cg.outputs[i])) set_map(op.out[i], mapping(cg.outputs[i]));
      for (int t : op.in) ensure_linear(t);
      for (int t : op.out) ensure_linear(t);
      c.tiles = tile_set(op.placement);
      c.tiles.count = 0;
      return;
    }
    case OpKind::HostLoad:
      if (defer_source(op_id, op)) return;
      [[fallthrough]];
    case OpKind::HostStore: {
      int t = op.kind == OpKind::HostLoad ? op.out[0] : op.in[0];
      ensure_linear(t);
      c.tiles = mapping(t);
      return;
    }
    case OpKind::RemoteLoad:
      if (defer_source(op_id, op)) return;
      return cost_remote(op, c);
    case OpKind::RemoteStore:
      return cost_remote(op, c);
    case OpKind::Collective:
      return cost_collective(op, c);
    case OpKind::IpuCopy: {
      // A global exchange: the source stays where its producer put it,
      // the copy lands linearly on the destination IPU (its tensor's
      // placement); the Copy step pays the IPU-Link transfer.
      ensure_linear(op.in[0]);
      ensure_linear(op.out[0]);
      c.tiles = mapping(op.out[0]);
      CopyCost cc = copy_cost(mapping(op.in[0]), mapping(op.out[0]),
                              (int64_t)d_.tensors[op.out[0]].nbytes());
      c.compute = cc.compute;
      c.exchange = cc.exchange;
      return;
    }
    default: break;
  }
  switch (op.cost_class) {
    case CostClass::Elementwise: return cost_elementwise(op, c, false);
    case CostClass::Random: return cost_elementwise(op, c, true);
    case CostClass::Matmul: return cost_matmul(op, c);
    case CostClass::Conv:
    case CostClass::ConvDataGrad:
    case CostClass::ConvWeightsGrad: return cost_conv(op, c);
    case CostClass::Pool: return cost_pool(op, c);
    case CostClass::Norm: return cost_norm(op, c);
    case CostClass::Reduce:
    case CostClass::Sort:
    case CostClass::Scan: return cost_reduce(op, c);
    case CostClass::Softmax:
    case CostClass::Loss: return cost_softmax(op, c);
    case CostClass::Gather: return cost_gather(op, c);
    case CostClass::Scatter: return cost_scatter(op, c);
    case CostClass::View:
      if (!op.aliases.empty()) return cost_view(op, c);
      if (op.in.size() > 1 && op.out.size() == 1) return cost_multi_view(op, c);
      return cost_copy_op(op, c, false);
    // PopART's out-of-place views (ReshapeOpx, SliceOpx, TransposeOpx,
    // ConcatOpx) are cloneNcopy of the view: the clone keeps the tiles of
    // every element, so the copy is on tile.
    case CostClass::Copy:
    case CostClass::Rearrange: return cost_copy_op(op, c, true);
    case CostClass::Fill: return cost_fill(op, c);
    case CostClass::Print: return cost_print(op, c);
    case CostClass::CodeLoad: return cost_code_load(op, c);
    case CostClass::Collective: return cost_ipu_all_reduce(op, c);
    case CostClass::None:
    case CostClass::Program: break;
  }
  throw Error("IpuModel: op '" + op.name + "' of type '" + op.type +
              "' is a kernel op with cost class '" + cost_class_name(op.cost_class) +
              "': declare its cost class in its OpDef (define_op(..., cost=...))");
}

void Model::cost_view(const OpRecord& op, OpCost& c) {
  for (int t : op.in) ensure_linear(t);
  for (int t : op.out) ensure_linear(t);  // aliases: the input's mapping
  c.tiles = op.out.empty() ? tile_set(op.placement) : mapping(op.out[0]);
  c.tiles.count = 0;  // no program: a view of the input's storage
}

// Deferred sources: the tensor keeps no layout until a consumer gives it
// one; a source whose tensor is already laid out (an in-place load into a
// mapped tensor) is costed at once.
bool Model::defer_source(int op_id, const OpRecord& op) {
  if (op.out.empty() || op.out[0] < 0 || mapped(op.out[0])) return false;
  deferred_.push_back(op_id);
  return true;
}

void Model::finish_deferred() {
  for (int op_id : deferred_) {
    const auto& op = d_.ops[op_id];
    OpCost& c = cost_[op_id];
    if (op.kind == OpKind::RemoteLoad) {
      cost_remote(op, c);
      continue;
    }
    ensure_linear(op.out[0]);
    c.tiles = mapping(op.out[0]);
  }
  deferred_.clear();
}

TileMap Model::part_map(const TileMap& m, int64_t in_nelms, int64_t out_nelms, int64_t in_es,
                        int64_t out_es) {
  if (in_nelms <= 0 || m.count <= 0) return spread(m, 1, out_nelms, out_es);
  const int64_t tiles = std::max<int64_t>(1, ceil_div((int64_t)m.count * out_nelms, in_nelms));
  (void)in_es;
  return spread(m, std::min<int64_t>(tiles, m.set_size), out_nelms, out_es);
}

TileMap Model::joined_map(const std::vector<int>& ts, int64_t nelms, int64_t es) {
  TileMap base;
  int64_t tiles = 0;
  bool first = true;
  for (int t : ts) {
    if (t < 0) continue;
    ensure_linear(t);
    const TileMap& m = mapping(t);
    if (m.count <= 0) continue;
    if (first) base = m, first = false;
    tiles += m.count;
  }
  if (first) return TileMap{};
  return spread(base, std::min<int64_t>(std::max<int64_t>(1, tiles), base.set_size), nelms, es);
}

void Model::cost_multi_view(const OpRecord& op, OpCost& c) {
  const int out = op.out[0];
  const auto& te = d_.tensors[out];
  const int r = al_.root[out];
  view_parts_[r] = op.in;
  if (!mapped(out)) set_map(out, joined_map(op.in, te.nelms(), (int64_t)dtype_size(te.dtype)));
  c.tiles = mapping(out);
  c.tiles.count = 0;  // no program: a view of its parts
}

void Model::cost_elementwise(const OpRecord& op, OpCost& c, bool random) {
  // Inputs nobody laid out yet (a variable, a stream's tensor) are left to
  // output_like_input: they take the output's layout (PopART unwinds
  // through elementwise ops), so they are not exchanged.
  int out = !op.out.empty() ? op.out[0] : (!op.in.empty() && op.in[0] >= 0 ? op.in[0] : -1);
  if (out < 0) {
    c.tiles = tile_set(op.placement);
    c.tiles.count = 0;
    return;
  }
  TileMap m = output_like_input(op, out);
  for (size_t i = 1; i < op.out.size(); ++i) output_like_input(op, op.out[i]);
  const auto& te = d_.tensors[out];
  const int64_t es = (int64_t)dtype_size(te.dtype);
  const bool half = te.dtype == DType::Float16;
  int n_in = 0;
  for (int t : op.in) n_in += t >= 0;
  c.tiles = m;
  inputs_exchange(op, c, m, te.nelms());
  const int64_t n_t = m.count ? ceil_div(te.nelms(), m.count) : 0;
  std::string vname;
  if (random) {
    c.compute = ew_cycles(n_t, es, 30, 4, 0);  // [assumption] RNG: ~4 cycles per vector
    vname = "poprand::" + op.cost.vertex + "<" + dtype_name(te.dtype) + ">";
  } else {
    EwShape s = ew_shape(op, n_in, half);
    c.compute = ew_cycles(n_t, es, s.header, s.per_vector, s.unroll);
    vname = std::string(n_in <= 1 ? "popops::UnaryOp<" : "popops::BinaryOp<") +
            op.cost.vertex + "," + dtype_name(te.dtype) + ">";
  }
  c.flops = (double)te.nelms();
  c.vtypes.push_back(vtype(vname, n_in <= 1 ? 300 : 400));
  c.state = 4 * (n_in + (int64_t)op.out.size()) + 4;  // a pointer per operand, a size
  c.programs += 1;
}

// popops::reduce: each input tile reduces its part into fp32 partials,
// the partials are exchanged to the output's tiles and reduced again
// (two compute sets and an exchange). TopK/ArgMax/CumSum are costed alike.
void Model::cost_reduce(const OpRecord& op, OpCost& c) {
  for (int t : op.in) ensure_linear(t);
  const int in = op.in.empty() ? -1 : op.in[0];
  const int out = op.out.empty() ? -1 : op.out[0];
  if (in < 0 || out < 0) return cost_elementwise(op, c, false);
  const auto& ti = d_.tensors[in];
  const auto& to = d_.tensors[out];
  for (int t : op.out) output_like_input(op, t);  // same size (CumSum) follows, else linear
  const TileMap& im = mapping(in);
  const TileMap& om = mapping(out);
  const int64_t es = (int64_t)dtype_size(ti.dtype);
  const int64_t n_in_t = im.count ? ceil_div(ti.nelms(), im.count) : 0;
  const int64_t out_n = std::max<int64_t>(1, to.nelms());
  const int64_t per_vector = op.cost_class == CostClass::Sort ? 3 : op.cost_class == CostClass::Scan ? 4 : 2;
  c.tiles = im.count >= om.count ? im : om;
  c.compute = ew_cycles(n_in_t, es, 20, per_vector, 0);
  const std::string& bt = op.cost.vertex;
  c.vtypes.push_back(vtype("popops::Reduce<" + bt + "," + dtype_name(ti.dtype) + ">", 600));
  c.state = 24;
  c.programs += 1;
  c.flops = (double)ti.nelms();
  const int64_t partials_t = std::min(out_n, n_in_t);  // per input tile
  if (im.count > 1 && partials_t < ti.nelms()) {
    const int64_t total = partials_t * im.count;
    // The second stage reduces each output element's partials on one
    // tile, the outputs spread over up to the input's tiles (popops'
    // intermediate stage), not all gathered on the output's few tiles.
    const int64_t stage_tiles =
        std::max<int64_t>(1, std::min<int64_t>(im.count, std::max<int64_t>(om.count, out_n)));
    const int64_t recv_t = ceil_div(total, stage_tiles) * 4;
    Xch x = exchange_in(im, om.ipu, std::max(recv_t, partials_t * 4), total * 4);
    c.exchange += x.cycles;
    c.xcode += x.code + t_.xc_region * std::min<int64_t>(im.count, 64);
    c.compute += ew_cycles(ceil_div(total, stage_tiles), 4, 20, 2, 0);
    c.vtypes.push_back(vtype("popops::ReducePartials<" + bt + ",float>", 400));
    c.state += 24;
    c.programs += 2;
    // Each input tile holds its partials; the received ones are on the
    // second stage's tiles (their total spread here over the op's tiles).
    c.temp += partials_t * 4 + ceil_div(recv_t * stage_tiles, std::max(1, c.tiles.count));
  }
}

// Softmax (popnn) and the losses built on it: a max and a sum reduction
// along rows and two elementwise passes (sub+exp, divide).
void Model::cost_softmax(const OpRecord& op, OpCost& c) {
  for (int t : op.in) ensure_linear(t);
  const int in = op.in.empty() ? -1 : op.in[0];
  if (in < 0) return cost_elementwise(op, c, false);
  const auto& ti = d_.tensors[in];
  for (int t : op.out) output_like_input(op, t);
  const TileMap& im = mapping(in);
  const int64_t es = (int64_t)dtype_size(ti.dtype);
  const bool half = ti.dtype == DType::Float16;
  const int64_t n_t = im.count ? ceil_div(ti.nelms(), im.count) : 0;
  c.tiles = im;
  c.compute = 2 * ew_cycles(n_t, es, 20, 2, 0) + ew_cycles(n_t, es, 33 + 9, half ? 4 : 6, half ? 4 : 2) +
              ew_cycles(n_t, es, half ? 26 : 29, half ? 21 : 10, half ? 4 : 2);
  const int64_t rows = ti.shape.empty() ? 1 : std::max<int64_t>(1, ti.nelms() / std::max<int64_t>(1, ti.shape.back()));
  if (im.count > 1) {
    // Row statistics gathered and broadcast back: two small exchanges.
    Xch x = exchange_in(im, im.ipu, std::min<int64_t>(rows, n_t) * 4, rows * 4 * im.count);
    c.exchange += 2 * x.cycles;
    c.xcode += 2 * x.code;
    c.programs += 2;
  }
  const std::string dn = dtype_name(ti.dtype);
  c.vtypes.push_back(vtype("popops::Reduce<Max," + dn + ">", 600));
  c.vtypes.push_back(vtype("popops::Reduce<Add," + dn + ">", 600));
  c.vtypes.push_back(vtype("popops::UnaryOp<Exp," + dn + ">", 300));
  c.vtypes.push_back(vtype("popops::BinaryOp<Div," + dn + ">", 400));
  if (op.cost_class == CostClass::Loss) c.vtypes.push_back(vtype("popnn::LossTransform<" + dn + ">", 500));
  c.state = 4 * 24;
  c.programs += 4;
  c.flops = 5.0 * (double)ti.nelms();
  // Row statistics (a max and an fp32 sum, 8 B a row) exist on a tile for
  // the rows its n_t consecutive elements touch, not for every row. The
  // forward pass works in place on its output (PopART SoftmaxOpx: a
  // cloneNcopy, then popnn::nonLinearityInPlace), so its only temporaries
  // are those; the gradient (two inputs, y and g: popnn
  // softmaxInputGradient makes y*g the output and y*sum(y*g) a temporary)
  // and the losses hold one more copy.
  const int64_t row_len = std::max<int64_t>(1, ti.nelms() / rows);
  c.temp += std::min<int64_t>(rows, ceil_div(n_t, row_len) + 1) * 8;
  const bool forward = op.cost_class == CostClass::Softmax && op.in.size() == 1;
  if (!forward) c.temp += n_t * es;
}

// popops::multiSlice / dynamicSlice: the output, mapped linearly, pulls
// its rows from wherever the table lives.
void Model::cost_gather(const OpRecord& op, OpCost& c) {
  for (int t : op.in) ensure_linear(t);
  if (op.out.empty()) return cost_elementwise(op, c, false);
  const int out = op.out[0];
  const auto& to = d_.tensors[out];
  if (!mapped(out)) set_map(out, linear(to.nelms(), to.dtype, op.placement));
  const TileMap& om = mapping(out);
  const int64_t es = (int64_t)dtype_size(to.dtype);
  const int64_t bytes_t = om.max_tile();
  c.tiles = om;
  const TileMap& src = op.in.empty() || op.in[0] < 0 ? om : mapping(op.in[0]);
  Xch x = exchange_in(src, om.ipu, bytes_t, to.nbytes());
  c.exchange += x.cycles;
  (x.global ? c.gxcode : c.xcode) += x.code + t_.xc_region * 8;  // dynamic offsets
  c.compute = t_.supervisor_cycles + 6 * (20 + ceil_div(ceil_div(bytes_t, t_.workers), t_.memcpy_bytes_per_cycle));
  c.vtypes.push_back(vtype(std::string("popops::MultiSlice<") + dtype_name(to.dtype) + ">", 500));
  c.state = 28;
  c.programs += 2;
  c.temp += bytes_t;
  (void)es;
}

// popops::multiUpdate / dynamicUpdate / multiUpdateAdd. Two layouts:
// * the updates sit on no more tiles than the output: they are exchanged
//   to the output's tiles and written (or added) in place there;
// * the updates are spread over more tiles than the output (a small
//   table updated from many rows: an embedding or position-bias
//   gradient): poplibs' plan splits the lookups over the updates' tiles.
//   Each of those tiles adds its own updates into an fp32 partial of its
//   share of the output, and the partials are reduced onto the output's
//   tiles in two stages of ceil(sqrt(L)) partials each (L partials per
//   output tile), so no tile receives all the updates.
void Model::cost_scatter(const OpRecord& op, OpCost& c) {
  for (int t : op.in) ensure_linear(t);
  if (op.out.empty()) return cost_elementwise(op, c, false);
  TileMap m = output_like_input(op, op.out[0]);
  c.tiles = m;
  int64_t upd_bytes = 0;
  for (size_t i = 1; i < op.in.size(); ++i)
    if (op.in[i] >= 0) upd_bytes = std::max<int64_t>(upd_bytes, (int64_t)d_.tensors[op.in[i]].nbytes());
  // The updates: the largest input not the size of the output (Scatter's
  // values, ScatterReduce's data; the indices come with them).
  int upd = -1;
  const int64_t out_n = d_.tensors[op.out[0]].nelms();
  for (int t : op.in)
    if (t >= 0 && d_.tensors[t].nelms() != out_n &&
        (upd < 0 || d_.tensors[t].nbytes() > d_.tensors[upd].nbytes()))
      upd = t;
  const TileMap& src = upd >= 0 ? mapping(upd) : m;
  const std::string vname = std::string("popops::MultiUpdate<") + dtype_name(d_.tensors[op.out[0]].dtype) + ">";
  if (src.ipu == m.ipu && src.count > m.count && m.count > 0) {
    const int64_t es = std::max<int64_t>(1, (int64_t)dtype_size(d_.tensors[op.out[0]].dtype));
    const int64_t partial_t = ceil_div(m.max_tile(), es) * 4;
    const int64_t lookups = ceil_div(src.count, m.count);  // partials per output tile
    int64_t group = 1;
    while (group * group < lookups) ++group;
    c.tiles = src;
    const int64_t upd_t = src.max_tile();
    c.compute = t_.supervisor_cycles + 6 * (24 + ceil_div(ceil_div(upd_t, t_.workers), t_.memcpy_bytes_per_cycle));
    c.compute += 2 * ew_cycles(group * ceil_div(partial_t, 4), 4, 20, 2, 0);  // the two reduce stages
    if (op.aliases.empty()) c.compute += ceil_div(m.max_tile(), t_.memcpy_bytes_per_cycle);
    Xch x = exchange_in(src, m.ipu, group * partial_t, partial_t * src.count);
    c.exchange += 2 * x.cycles;
    c.xcode += 2 * x.code + t_.xc_region * 8;
    c.vtypes.push_back(vtype(vname, 600));
    c.vtypes.push_back(vtype("popops::Reduce<Add,float>", 600));
    c.state = 32 + 24;
    c.programs += 4;
    c.temp += partial_t * (1 + group);  // its partial and one stage's received partials
    return;
  }
  const int64_t bytes_t = std::min<int64_t>(upd_bytes, std::max<int64_t>(m.max_tile(), ceil_div(upd_bytes, std::max(1, m.count)) * 2));
  Xch x = exchange_in(op.in.size() > 1 && op.in[1] >= 0 ? mapping(op.in[1]) : m, m.ipu, bytes_t, upd_bytes);
  c.exchange += x.cycles;
  (x.global ? c.gxcode : c.xcode) += x.code + t_.xc_region * 8;
  c.compute = t_.supervisor_cycles + 6 * (24 + ceil_div(ceil_div(bytes_t, t_.workers), t_.memcpy_bytes_per_cycle));
  if (op.aliases.empty())  // out of place: the input is copied first
    c.compute += ceil_div(m.max_tile(), t_.memcpy_bytes_per_cycle);
  c.vtypes.push_back(vtype(vname, 600));
  c.state = 32;
  c.programs += 2;
  c.temp += bytes_t;
}

// Data movement: PopART's cloneNcopy. `keeps`: the output clones the
// input's tiles (identity and reshape: the same layout; a slice or a
// split's part: the tiles holding it; a concatenation: its parts'
// tiles) and the copy is on tile. Otherwise (a view op Poplar cannot
// alias) a new linear layout, exchanged.
void Model::cost_copy_op(const OpRecord& op, OpCost& c, bool keeps) {
  for (int t : op.in) ensure_linear(t);
  int64_t out_bytes = 0;
  int64_t offset = 0;  // elements of the input before this output (a split's parts)
  for (int t : op.out) {
    const auto& te = d_.tensors[t];
    const int64_t es = (int64_t)dtype_size(te.dtype);
    if (!keeps) ensure_linear_at(t, op.placement);
    else if (op.in.size() > 1) {
      // A concatenation: the clone of the parts' view.
      if (!mapped(t)) set_map(t, joined_map(op.in, te.nelms(), es));
    } else if (!op.in.empty() && op.in[0] >= 0 && d_.tensors[op.in[0]].nelms() != te.nelms()) {
      // A slice or split part: the tiles holding that part of the input.
      const auto& ti = d_.tensors[op.in[0]];
      if (!mapped(t)) {
        TileMap m = mapping(op.in[0]);
        if (op.out.size() == 1 && op.attrs.has("starts")) {
          // A slice starts where its first element lies in the input.
          const auto starts = op.attrs.ints("starts", {});
          if (starts.size() == ti.shape.size()) {
            int64_t stride = 1;
            for (size_t a = starts.size(); a-- > 0;) {
              offset += starts[a] * stride;
              stride *= ti.shape[a];
            }
          }
        }
        if (ti.nelms() > 0 && m.count > 0 && offset > 0) {
          const int64_t skip = (int64_t)m.count * offset / ti.nelms();
          m.first = (int)((m.first + skip) % m.set_size);
          m.count = (int)std::max<int64_t>(1, m.count - skip);
        }
        set_map(t, part_map(m, ti.nelms() - offset, te.nelms(), (int64_t)dtype_size(ti.dtype), es));
      }
      offset += te.nelms();
    } else {
      output_like_input(op, t);
    }
    out_bytes += (int64_t)te.nbytes();
  }
  if (op.out.empty() || op.in.empty() || op.in[0] < 0) {
    c.tiles = tile_set(op.placement);
    c.tiles.count = 0;
    return;
  }
  const TileMap& src = mapping(op.in[0]);
  const TileMap& dst = mapping(op.out[0]);
  c.tiles = dst;
  CopyCost cc = copy_cost(src, dst, out_bytes);
  if (keeps && !cc.on_tile && src.ipu == dst.ipu && src.set_begin == dst.set_begin &&
      src.first == dst.first && out_bytes > 0) {
    // A clone of (part of) the input's tiles: every element is copied on
    // the tile that holds it.
    cc = CopyCost{};
    cc.on_tile = true;
    cc.compute = t_.supervisor_cycles + ceil_div(dst.max_tile(), t_.memcpy_bytes_per_cycle);
  }
  c.compute = cc.compute;
  c.exchange = cc.exchange;
  c.copy_desc = cc.on_tile ? t_.copy_descriptor : 0;
  (cc.global ? c.gxcode : c.xcode) += cc.code;
  c.programs += 1;
}

void Model::cost_fill(const OpRecord& op, OpCost& c) {
  for (int t : op.in) ensure_linear(t);
  if (op.out.empty()) return cost_elementwise(op, c, false);
  ensure_linear_at(op.out[0], op.placement);
  const TileMap& m = mapping(op.out[0]);
  c.tiles = m;
  // popops::Fill: 64-bit stores by 6 workers [assumption].
  c.compute = t_.supervisor_cycles + t_.workers * (10 + ceil_div(ceil_div(m.max_tile(), t_.workers), 8));
  c.vtypes.push_back(vtype(std::string("popops::Fill<") + dtype_name(d_.tensors[op.out[0]].dtype) + ">", 150));
  c.state = 12;
  c.programs += 1;
}

void Model::cost_print(const OpRecord& op, OpCost& c) {
  for (int t : op.in) ensure_linear(t);
  for (int t : op.out) output_like_input(op, t);
  if (op.in.empty() || op.in[0] < 0) return;
  const TileMap& m = mapping(op.in[0]);
  c.tiles = m;
  c.exchange = stream_cycles((int64_t)d_.tensors[op.in[0]].nbytes(), t_.host_bytes_per_second);
  c.hxcode = t_.hxc_program + t_.xc_region;
  c.programs += 2;
}

void Model::cost_code_load(const OpRecord& op, OpCost& c) {
  c.tiles = tile_set(op.placement);
  c.tiles.count = c.tiles.set_size;
  c.hxcode = t_.hxc_program;
  c.programs += 1;
  c.code_load_graph = op.code_load_graph;
  // Cycles are set once the loaded code's size is known (code_walk).
}

// RemoteLoad = Copy(buffer entry -> landing pad), Copy(pad -> out);
// RemoteStore = Copy(in -> pad), Copy(pad -> buffer entry) (§1.6): a
// global sync, the bytes at the streaming bandwidth, an on-tile pad copy.
// The first user's layout is the pad's (§1.6: a clone of it).
void Model::cost_remote(const OpRecord& op, OpCost& c) {
  const bool load = op.kind == OpKind::RemoteLoad;
  for (int t : op.in) ensure_linear(t);
  const int t = load ? op.out[0] : op.in[0];
  ensure_linear(t);
  const TileMap& m = mapping(t);
  c.tiles = m;
  const int64_t bytes = (int64_t)d_.tensors[t].nbytes();
  c.exchange = stream_cycles(bytes, t_.streaming_bytes_per_second);
  c.compute = bytes > 0 ? t_.supervisor_cycles + ceil_div(m.max_tile(), t_.memcpy_bytes_per_cycle) : 0;
  c.hxcode = t_.hxc_program + t_.xc_region;
  c.copy_desc = t_.copy_descriptor;
  c.programs = 2;
  c.temp = m.max_tile();  // the landing pad, live only during this step
  const int b = op.remote_buffer;
  if (b >= 0 && b < (int)pad_map_.size() && !pad_mapped_[b]) {
    pad_map_[b] = m;
    pad_mapped_[b] = 1;
  }
}

// A collective across the replicas of each group (§5: GCL rings over
// the IPU-Links), with G replicas in a group and B bytes: all-reduce
// 2(G-1)/G * B / bw_link + 2(G-1) global syncs; reduce-scatter and
// all-gather (G-1)/G * B / bw_link + (G-1) syncs (B the unsharded size:
// the input of a reduce-scatter, the output of an all-gather). A
// reduction also adds each received slice on tile; one replica alone
// (G = 1) exchanges nothing.
void Model::cost_collective(const OpRecord& op, OpCost& c) {
  for (int t : op.in) ensure_linear(t);
  for (int t : op.out) ensure_linear(t);
  const auto& cd = op.collective;
  int64_t g = d_.total_replicas();
  if (!cd.group_of.empty()) {
    int64_t in_group0 = 0;
    for (int x : cd.group_of) in_group0 += x == cd.group_of[0];
    g = in_group0;
  }
  const int in = op.in[0], out = op.out[0];
  const bool gather = cd.kind == CollectiveKind::AllGather;
  const TileMap& m = mapping(gather ? out : in);
  c.tiles = m;
  const int64_t bytes = (int64_t)d_.tensors[gather ? out : in].nbytes();
  c.programs = 1;
  if (g <= 1 || bytes <= 0) {
    c.compute = bytes > 0 ? t_.supervisor_cycles + ceil_div(mapping(out).max_tile(),
                                                            t_.memcpy_bytes_per_cycle) : 0;
    c.copy_desc = t_.copy_descriptor;
    return;
  }
  const int steps = cd.kind == CollectiveKind::AllReduce ? 2 : 1;
  const double bpc = t_.link_bytes_per_second / t_.clock_hz;
  const double moved = (double)steps * (double)(g - 1) / (double)g * (double)bytes;
  c.exchange = steps * (g - 1) * t_.sync_global_cycles + (int64_t)std::ceil(moved / bpc);
  const bool reduces = !gather && cd.op != ReduceOp::Local;
  // On-tile work per ring step: add (or copy) one 1/G slice of each tile's part.
  const int64_t per_step = ceil_div(ceil_div(m.max_tile(), g), t_.memcpy_bytes_per_cycle);
  c.compute = steps * (g - 1) * (t_.supervisor_cycles + (reduces ? 2 : 1) * per_step);
  c.gxcode = t_.hxc_program + t_.xc_region * (g - 1);
  c.copy_desc = t_.copy_descriptor;
}

void Model::cost_pool(const OpRecord& op, OpCost& c) {
  for (int t : op.in) ensure_linear(t);
  if (op.out.empty() || op.in.empty() || op.in[0] < 0) return cost_elementwise(op, c, false);
  const int out = op.out[0];
  const auto& to = d_.tensors[out];
  TileMap m = output_like_input(op, out);  // a gradient: like the input it has the size of
  c.tiles = m;
  inputs_exchange(op, c, m, to.nelms());
  // The pooled tensor (the smaller side) sets the work: each of its
  // elements reads (or, for a gradient, writes) one window.
  int64_t pooled = to.nelms();
  for (int t : op.in)
    if (t >= 0) pooled = std::min<int64_t>(pooled, d_.tensors[t].nelms());
  int64_t window = 1;
  for (int64_t k : op.attrs.ints("kernel", {})) window *= std::max<int64_t>(1, k);
  const int64_t es = (int64_t)dtype_size(to.dtype);
  const int64_t pooled_t = m.count ? ceil_div(pooled, m.count) : 0;
  // [assumption] 2 cycles per vector of window elements (load and max/add).
  c.compute = ew_cycles(pooled_t * window, es, 26, 2, 0);
  c.flops = (double)pooled * (double)window;
  c.vtypes.push_back(vtype("popnn::" + op.cost.vertex + "<" + dtype_name(to.dtype) + ">", 700));
  c.state = 4 * ((int64_t)op.in.size() + (int64_t)op.out.size()) + 16;  // operands, worklists
  c.programs += 1;
}

void Model::cost_norm(const OpRecord& op, OpCost& c) {
  for (int t : op.in) ensure_linear(t);
  const int in = op.in.empty() ? -1 : op.in[0];
  if (in < 0 || op.out.empty()) return cost_elementwise(op, c, false);
  const auto& ti = d_.tensors[in];
  for (int t : op.out) output_like_input(op, t);
  const TileMap& im = mapping(in);
  const int64_t es = (int64_t)dtype_size(ti.dtype);
  const bool half = ti.dtype == DType::Float16;
  const int64_t n_t = im.count ? ceil_div(ti.nelms(), im.count) : 0;
  c.tiles = im;
  // Statistics: a sum and a sum of squares per group; whitening, then
  // scale and shift: two elementwise passes of two operations each.
  c.compute = 2 * ew_cycles(n_t, es, 20, 2, 0) + 2 * ew_cycles(n_t, es, half ? 26 : 29, 6, 0);
  // Groups: the statistics outputs' size (GroupNorm), else the channels.
  int64_t groups = ti.shape.size() > 1 ? ti.shape[1] : 1;
  if (op.out.size() > 1) groups = std::max<int64_t>(1, d_.tensors[op.out[1]].nelms());
  if (im.count > 1) {
    // Statistics gathered per group and broadcast back: two small exchanges.
    Xch x = exchange_in(im, im.ipu, std::min<int64_t>(groups, n_t) * 8, groups * 8 * im.count);
    c.exchange += 2 * x.cycles;
    c.xcode += 2 * x.code;
    c.programs += 2;
  }
  const std::string dn = dtype_name(ti.dtype);
  c.vtypes.push_back(vtype("popops::Reduce<Add," + dn + ">", 600));
  c.vtypes.push_back(vtype("popops::Reduce<SquareAdd," + dn + ">", 600));
  c.vtypes.push_back(vtype("popnn::" + op.cost.vertex + "<" + dn + ">", 500));
  c.state = 4 * 24;
  c.programs += 3;
  c.flops = 8.0 * (double)ti.nelms();
  // poplin::normWhiten makes x - mean (a tensor of x's type, scaled in
  // place; normalise's mul by gamma is the output), and the statistics
  // (an fp32 sum and sum of squares, 8 B a group) exist on a tile for
  // the groups its n_t consecutive elements touch: a group is a run of
  // `inner` elements (the dims after the group axis, for the statistics'
  // groups nelms / groups).
  int64_t inner = 1;
  if (op.out.size() > 1) inner = std::max<int64_t>(1, ti.nelms() / groups);
  else for (size_t i = 2; i < ti.shape.size(); ++i) inner *= std::max<int64_t>(1, ti.shape[i]);
  c.temp += n_t * es + std::min<int64_t>(groups, ceil_div(n_t, inner) + 1) * 8;
}

void Model::cost_ipu_all_reduce(const OpRecord& op, OpCost& c) {
  for (int t : op.in) ensure_linear(t);
  for (int t : op.out) output_like_input(op, t);
  if (op.in.empty() || op.in[0] < 0 || op.out.empty()) return cost_elementwise(op, c, false);
  const int64_t n = (int64_t)op.in.size();
  const TileMap& m = mapping(op.out[0]);
  c.tiles = m;
  const int64_t bytes = (int64_t)d_.tensors[op.in[0]].nbytes();
  c.programs = 1;
  c.copy_desc = t_.copy_descriptor;
  if (n <= 1 || bytes <= 0) return;
  const double bpc = t_.link_bytes_per_second / t_.clock_hz;
  const double moved = 2.0 * (double)(n - 1) / (double)n * (double)bytes;
  c.exchange = 2 * (n - 1) * t_.sync_global_cycles + (int64_t)std::ceil(moved / bpc);
  const int64_t per_step = ceil_div(ceil_div(m.max_tile(), n), t_.memcpy_bytes_per_cycle);
  c.compute = 2 * (n - 1) * (t_.supervisor_cycles + 2 * per_step);
  c.gxcode = t_.hxc_program + t_.xc_region * (n - 1);
  c.flops = (double)(n - 1) * (double)d_.tensors[op.in[0]].nelms();
}

}  // namespace model
}  // namespace ipuxl
