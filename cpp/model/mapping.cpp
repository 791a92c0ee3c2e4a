// The IPU model: tile mapping, exchanges and copies (mapping.cpp).
#include "state.hpp"

#include <algorithm>
#include <cmath>

namespace ipuxl {
namespace model {

TileMap Model::tile_set(const Placement& p) const {
  TileMap m;
  m.ipu = p.ipu;
  const int io = t_.num_io_tiles;
  if (p.tile_set == TileSet::IO && io > 0) {
    m.set_begin = 0;
    m.set_size = io;
  } else {
    m.set_begin = io;
    m.set_size = t_.tiles_per_ipu - io;
  }
  return m;
}

int& Model::rotation(const TileMap& set) {
  return rotate_[(size_t)set.ipu * 2 + (set.set_begin == 0 && t_.num_io_tiles > 0 &&
                                        set.set_size == t_.num_io_tiles ? 1 : 0)];
}

// poputil::calcLinearTileMapping: a grain of one 64-bit vector, at least
// 128 bytes per tile, as few tiles as that allows up to the whole set;
// the start rotates across tensors like PopART's LinearMapper (§5.4).
TileMap Model::linear(int64_t nelms, DType dt, const Placement& p) {
  TileMap m = tile_set(p);
  const int64_t es = (int64_t)dtype_size(dt);
  if (nelms <= 0) return m;
  const int64_t grain = std::max<int64_t>(1, t_.vector_bytes / es);
  const int64_t min_elems = std::max<int64_t>(grain, ceil_div(128, es));
  const int64_t grains = ceil_div(nelms, grain);
  const int64_t min_grains = ceil_div(min_elems, grain);
  int64_t tiles = std::min<int64_t>(std::max<int64_t>(1, grains / min_grains), m.set_size);
  const int64_t gpt = ceil_div(grains, tiles);
  tiles = ceil_div(grains, gpt);
  const int64_t ept = gpt * grain;
  m.count = (int)tiles;
  m.per_tile = std::min(ept, nelms) * es;
  m.last = (nelms - ept * (tiles - 1)) * es;
  int& rot = rotation(m);
  m.first = rot % m.set_size;
  rot = (int)((rot + tiles) % m.set_size);
  return m;
}

// `bytes` spread evenly (in elements of `es` bytes) over `tiles` tiles of
// `where`'s set from its first tile.
TileMap Model::spread(const TileMap& where, int64_t tiles, int64_t nelms, int64_t es) {
  TileMap m = where;
  m.count = 0;
  m.per_tile = m.last = 0;
  if (nelms <= 0 || tiles <= 0) return m;
  const int64_t ept = spread_grain(nelms, tiles);
  tiles = ceil_div(nelms, ept);
  m.count = (int)tiles;
  m.per_tile = ept * es;
  m.last = (nelms - ept * (tiles - 1)) * es;
  return m;
}

// A range of `count` tiles for an op's own plan. poplin starts every
// plan on the first tile of its virtual graph in ascending order
// (ConvPlan.cpp getStartTile: startTileIdxForVirtualHierarchy, unless
// the enableConvDithering option, off by default, hashes the shape), so
// matmuls of one shape are laid out on the same tiles.
TileMap Model::op_range(const Placement& p, int64_t count) {
  TileMap m = tile_set(p);
  count = std::max<int64_t>(1, std::min<int64_t>(count, m.set_size));
  m.count = (int)count;
  m.first = 0;
  return m;
}

// m with the bytes of a tensor of `es` bytes per element instead of `from_es`.
TileMap Model::rescale(TileMap m, int64_t from_es, int64_t es) {
  if (from_es == es || from_es <= 0) return m;
  m.per_tile = m.per_tile / from_es * es;
  m.last = m.last / from_es * es;
  return m;
}

// Adds `each` bytes (times w) to every tile of m's range.
void Model::add_each(std::vector<double>& v, const TileMap& m, double each) const {
  if (each == 0) return;
  for_tiles(m, [&](int t, int64_t) { v[t] += each; });
}

void Model::add_map(std::vector<double>& v, const TileMap& m, double w) const {
  for_tiles(m, [&](int t, int64_t b) { v[t] += w * (double)b; });
}

void Model::add_ipu(std::vector<double>& v, int ipu, double each) const {
  if (each == 0) return;
  const int base = ipu * t_.tiles_per_ipu;
  for (int i = 0; i < t_.tiles_per_ipu; ++i) v[base + i] += each;
}

// ------------------------------------------------------------ vertex types
int Model::vtype(const std::string& name, int64_t code_bytes) {
  auto it = vtype_id_.find(name);
  if (it != vtype_id_.end()) return it->second;
  int id = (int)vtype_names_.size();
  vtype_id_[name] = id;
  vtype_names_.push_back(name);
  vtype_code_.push_back(code_bytes);
  return id;
}

void Model::set_map(int t, const TileMap& m) {
  int r = al_.root[t];
  if (mapped_[r]) return;
  map_[r] = m;
  mapped_[r] = 1;
}

void Model::ensure_linear(int t) {
  if (t < 0 || mapped(t)) return;
  const auto& te = d_.tensors[al_.root[t]];
  set_map(t, linear(te.nelms(), te.dtype, te.placement));
}

Xch Model::exchange_in(const TileMap& src, int dst_ipu, int64_t bytes_per_tile, int64_t total_bytes, int share) const {
  Xch x;
  if (bytes_per_tile <= 0) return x;
  x.global = src.ipu != dst_ipu;
  const int64_t regions = 1 + (src.per_tile > 0 ? ceil_div(bytes_per_tile, src.per_tile) : 1);
  x.code = (x.global ? t_.hxc_program : t_.xc_program) + t_.xc_region * regions;
  if (x.global) {
    const double bpc = t_.link_bytes_per_second / t_.clock_hz;
    x.cycles = t_.sync_global_cycles + (int64_t)std::ceil((double)total_bytes / bpc);
  } else {
    x.cycles = t_.sync_internal_cycles +
               ceil_div(bytes_per_tile, (int64_t)t_.exchange_bytes_per_cycle * share);
  }
  return x;
}

// -------------------------------------------------------- mapping + costs
void Model::map_and_cost() {
  const size_t n = d_.tensors.size();
  map_.assign(n, TileMap{});
  mapped_.assign(n, 0);
  cost_.assign(d_.ops.size(), OpCost{});
  pad_map_.assign(d_.remote_buffers.size(), TileMap{});
  pad_mapped_.assign(d_.remote_buffers.size(), 0);
  view_parts_.assign(n, {});
  deferred_.clear();
  // Callees first: a Function's parameters take the layout its body's
  // ops give them (PopART: subgraph inputs are created by their
  // consumers), and callers' tensors unwind through the call.
  for (int g : order_) {
    for (int op_id : d_.graphs[g].ops) {
      const auto& op = d_.ops[op_id];
      cost_op(op_id, op);
    }
    finish_deferred();
    for (int t : d_.graphs[g].inputs) ensure_linear(t);
    for (int t : d_.graphs[g].outputs) ensure_linear(t);
  }
  for (size_t t = 0; t < n; ++t)
    if (al_.root[t] == (int)t && !mapped_[t]) ensure_linear((int)t);
}

// Inputs that must be exchanged to the op's tiles: their bytes per tile.
void Model::inputs_exchange(const OpRecord& op, OpCost& c, const TileMap& out, int64_t out_nelms) {
  for (size_t i = 0; i < op.in.size(); ++i) {
    int t = op.in[i];
    if (t < 0) continue;
    ensure_linear(t);
    const auto& m = mapping(t);
    if (m.count == 0 || (m.same_tiles(out) && m.ipu == out.ipu)) continue;
    if (m.ipu == out.ipu && m.set_begin == out.set_begin && m.first == out.first &&
        m.count == out.count)
      continue;  // same tiles, another element size (cast, mask)
    const auto& te = d_.tensors[t];
    const int64_t es = (int64_t)dtype_size(te.dtype);
    const int64_t out_ept = out.count ? ceil_div(out_nelms, out.count) : 0;
    const int64_t need = std::min<int64_t>(te.nelms(), out_ept) * es;
    // A broadcast operand (fewer elements than the output) goes to many
    // tiles at once: the shared exchange bus doubles its rate (§3.1).
    const int share = te.nelms() < out_nelms ? 2 : 1;
    Xch x = exchange_in(m, out.ipu, need, std::min<int64_t>(te.nbytes(), need * out.count), share);
    c.exchange += x.cycles;
    (x.global ? c.gxcode : c.xcode) += x.code;
    c.programs += 1;
    c.temp += need;
  }
}

// The output's layout: aliased (in place) outputs keep their input's;
// others follow the first input of the same size (poplibs clones the
// input layout for elementwise outputs), else a linear mapping.
TileMap Model::output_like_input(const OpRecord& op, int out) {
  const auto& te = d_.tensors[out];
  auto same_size = [&](int t) {
    return t >= 0 && d_.tensors[t].nelms() == te.nelms() && d_.tensors[t].placement.ipu == op.placement.ipu;
  };
  if (!mapped(out)) {
    // Inputs laid out already first; an input nobody laid out yet only
    // when none is.
    for (int pass = 0; pass < 2 && !mapped(out); ++pass)
      for (int t : op.in) {
        if (!same_size(t) || (pass == 0 && !mapped(t))) continue;
        ensure_linear(t);
        const auto& ti = d_.tensors[t];
        if (mapping(t).ipu == op.placement.ipu && mapping(t).count) {
          set_map(out, rescale(mapping(t), (int64_t)dtype_size(ti.dtype), (int64_t)dtype_size(te.dtype)));
          break;
        }
      }
    if (!mapped(out)) set_map(out, linear(te.nelms(), te.dtype, op.placement));
  }
  // Inputs of the output's size nobody laid out yet take its layout
  // (PopART unwinds an elementwise op's output layout to its inputs).
  for (int t : op.in)
    if (same_size(t) && !mapped(t))
      set_map(t, rescale(mapping(out), (int64_t)dtype_size(te.dtype), (int64_t)dtype_size(d_.tensors[t].dtype)));
  return mapping(out);
}

void Model::ensure_linear_at(int t, const Placement& p) {
  if (t < 0 || mapped(t)) return;
  const auto& te = d_.tensors[t];
  set_map(t, linear(te.nelms(), te.dtype, p));
}

int64_t Model::stream_cycles(int64_t bytes, double bytes_per_second) const {
  const double bpc = bytes_per_second / t_.clock_hz;
  return t_.sync_global_cycles + (int64_t)std::ceil((double)bytes / bpc);
}

// A Copy program: an on-tile copy when both tensors have the same tiles,
// else an exchange (4 B/cycle per tile), or a global exchange between IPUs.
CopyCost Model::copy_cost(const TileMap& src, const TileMap& dst, int64_t bytes) const {
  CopyCost c;
  if (bytes <= 0) return c;
  if (src.ipu == dst.ipu && src.set_begin == dst.set_begin && src.first == dst.first &&
      src.count == dst.count) {
    c.on_tile = true;
    c.compute = t_.supervisor_cycles + ceil_div(dst.max_tile(), t_.memcpy_bytes_per_cycle);
    return c;
  }
  if (src.ipu != dst.ipu) {
    c.global = true;
    const double bpc = t_.link_bytes_per_second / t_.clock_hz;
    c.exchange = t_.sync_global_cycles + (int64_t)std::ceil((double)bytes / bpc);
    c.code = t_.hxc_program + t_.xc_region;
    return c;
  }
  const int64_t out_t = std::max(src.max_tile(), dst.max_tile());
  c.exchange = t_.sync_internal_cycles + ceil_div(out_t, t_.exchange_bytes_per_cycle);
  const int64_t regions = 1 + (src.per_tile > 0 ? ceil_div(dst.max_tile(), src.per_tile) : 1);
  c.code = t_.xc_program + t_.xc_region * regions;
  return c;
}

}  // namespace model
}  // namespace ipuxl
