// The IPU model: code instances and code size (code.cpp).
#include "state.hpp"

#include <algorithm>
#include <cmath>

namespace ipuxl {
namespace model {

// --------------------------------------------------------- code instances
// How many copies of each graph's code the program holds: a graph called
// by Call/Repeat is one Function (1); each If site inlines its branch
// graphs (IfOpx::callBranch adds the branch's sequences in place, §1.3).
void Model::code_instances() {
  const size_t ng = d_.graphs.size();
  inst_.assign(ng, 0);
  needed_.assign(ng, 0);
  if_inst_.assign(ng, 0);
  r_.graphs.assign(ng, GraphReport{});
  for (size_t g = 0; g < ng; ++g) r_.graphs[g].graph = (int)g;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    const int g = *it;
    inst_[g] = g == main_ ? 1 : (needed_[g] ? 1 : 0) + if_inst_[g];
    r_.graphs[g].function = g != main_ && needed_[g];
    r_.graphs[g].code_instances = inst_[g];
    for (int op_id : d_.graphs[g].ops) {
      const auto& op = d_.ops[op_id];
      r_.graphs[g].ops++;
      if (op.kind == OpKind::Call || op.kind == OpKind::Repeat) {
        needed_[op.graphs[0]] = 1;
        r_.graphs[op.graphs[0]].call_sites++;
      } else if (op.kind == OpKind::If) {
        for (int b : op.graphs) {
          if_inst_[b] += inst_[g];
          r_.graphs[b].if_sites++;
        }
      }
    }
  }
  loaded_.assign(ng, {});
  for (const auto& op : d_.ops) {
    const int g = op.code_load_graph;  // validate(): a graph of the program, or -1
    if (g < 0) continue;
    if (loaded_[g].empty()) loaded_[g].assign(T_, 0.0);
    r_.graphs[g].code_loaded = true;
  }
}

void Model::code_add(Acc& a, int category, const TileMap& m, int64_t each) {
  if (each == 0 || m.count == 0) return;
  const bool movable = a.loaded && (category == kControlCode || category == kInternalExchangeCode ||
                                    category == kHostExchangeCode || category == kGlobalExchangeCode);
  add_each(movable ? *a.loaded : (*a.cat)[category], m, a.w * (double)each);
  *a.sum += each * m.count;
  if (site_op_ >= 0) {
    auto& s = site_[site_op_];
    (category == kControlCode ? s.ccode
     : category == kVertexInstanceState || category == kCopyDescriptor ? s.state
                                                                         : s.xcode) += each * m.count;
  }
}

void Model::control_add(Acc& a, int ipu, int64_t each) {
  if (each == 0) return;
  add_ipu(a.loaded ? *a.loaded : (*a.cat)[kControlCode], ipu, a.w * (double)each);
  *a.sum += each * t_.tiles_per_ipu;
  if (site_op_ >= 0) site_[site_op_].ccode += each * t_.tiles_per_ipu;
}

// Poplar compiles each exchange program to code once per distinct
// pattern: Copy programs that move the same bytes between the same
// tiles and offsets reuse their code (PopART ipucopyx.cpp: with
// dontOutline=false "the copies (buffers & code) are reused"). An
// exchange is identified by what it moves: the tiles and layout of every
// tensor it reads and writes, the tiles of the op, and the op's exchange
// plan. Ops built twice with the same layouts (inlined identical layers)
// therefore share their exchange code; compute sets, vertex state and
// control programs stay per instance. Code that is loaded with its
// Function (remote_code_load) is not shared with always-live code.
bool Model::exchange_seen(const std::string& key) {
  return !xseen_.insert(key).second;
}

static void key_map(std::string& k, const TileMap& m) {
  k += std::to_string(m.ipu) + ':' + std::to_string(m.set_begin) + ':' +
       std::to_string(m.first) + ':' + std::to_string(m.count) + ':' +
       std::to_string(m.per_tile) + ':' + std::to_string(m.last) + ';';
}

std::string Model::op_exchange_key(int op_id) const {
  const auto& op = d_.ops[op_id];
  const OpCost& c = cost_[op_id];
  std::string k = std::to_string((int)op.cost_class) + '|' + c.plan + '|' +
                  std::to_string(c.xcode) + '|';
  key_map(k, c.tiles);
  for (const auto* ts : {&op.in, &op.out})
    for (int t : *ts) {
      k += '|';
      if (t < 0 || !mapped(t)) continue;
      k += std::to_string(d_.tensors[t].nbytes()) + '@';
      key_map(k, mapping(t));
    }
  return k;
}

std::string Model::copy_exchange_key(int src, int dst) const {
  std::string k = "copy|" + std::to_string(d_.tensors[dst].nbytes()) + '|';
  key_map(k, mapping(src));
  key_map(k, mapping(dst));
  return k;
}

void Model::mark_vertices(const OpCost& c) {
  for (int v : c.vtypes) {
    if ((size_t)v >= vcover_.size()) vcover_.resize((size_t)v + 1);
    auto& cov = vcover_[v];
    if (cov.empty()) cov.assign(T_, 0);
    for_tiles(c.tiles, [&](int t, int64_t) { cov[t] = 1; });
  }
}

void Model::copy_code(Acc& a, int src, int dst, int ipu) {
  const TileMap& s = mapping(src);
  const TileMap& d = mapping(dst);
  CopyCost cc = copy_cost(s, d, (int64_t)d_.tensors[dst].nbytes());
  if (cc.on_tile) {
    // No data crosses tiles: no exchange phase, so no sync before it.
    code_add(a, kCopyDescriptor, d, t_.copy_descriptor);
    control_add(a, ipu, t_.cc_program);
    return;
  } else if (cc.global) {
    code_add(a, kGlobalExchangeCode, s, cc.code);
    code_add(a, kGlobalExchangeCode, d, cc.code);
  } else if (a.loaded || !exchange_seen(copy_exchange_key(src, dst))) {
    code_add(a, kInternalExchangeCode, s, cc.code);
    code_add(a, kInternalExchangeCode, d, cc.code);
  }
  control_add(a, ipu, t_.cc_program + t_.cc_sync);
}

void Model::walk_code(const Node& n, Acc& a, int site_ipu) {
  switch (n.kind) {
    case NodeKind::Sequence: {
      int ipu = n.op >= 0 ? d_.ops[n.op].placement.ipu : site_ipu;
      const int outer = site_op_;
      if (n.op >= 0 && is_site(d_.ops[n.op].kind)) site_op_ = n.op;
      for (const auto& ch : n.body) walk_code(ch, a, ipu);
      site_op_ = outer;
      return;
    }
    case NodeKind::RemoteLoad:   // a leaf program like Execute: its cost is the op's
    case NodeKind::RemoteStore:
    case NodeKind::Collective:
    case NodeKind::Execute: {
      const OpCost& c = cost_[n.op];
      const int ipu = d_.ops[n.op].placement.ipu;
      if (c.tiles.count > 0) {
        mark_vertices(c);
        code_add(a, kVertexInstanceState, c.tiles, c.state);
        code_add(a, kCopyDescriptor, c.tiles, c.copy_desc);
        if (c.xcode > 0 && !a.loaded && exchange_seen(op_exchange_key(n.op)))
          xshared_[n.op] = 1;
        else
          code_add(a, kInternalExchangeCode, c.tiles, c.xcode);
        code_add(a, kHostExchangeCode, c.tiles, c.hxcode);
        code_add(a, kGlobalExchangeCode, c.tiles, c.gxcode);
      }
      control_add(a, ipu, (int64_t)c.programs * (t_.cc_program + t_.cc_sync));
      return;
    }
    case NodeKind::Copy:
      if (n.inter_ipu) {
        // Both IPUs take part in the exchange: each runs its control program.
        const int src_ipu = d_.ops[n.op].placement.ipu;
        const int dst_ipu = d_.tensors[n.dst].placement.ipu;
        copy_code(a, n.src, n.dst, src_ipu);
        if (dst_ipu != src_ipu) control_add(a, dst_ipu, t_.cc_program + t_.cc_sync);
        return;
      }
      copy_code(a, n.src, n.dst, site_ipu);
      return;
    case NodeKind::Bind:
      for (auto& [src, dst] : bound_copies(n)) copy_code(a, src, dst, site_ipu);
      return;
    case NodeKind::Call:
      control_add(a, site_ipu, t_.cc_call);
      return;
    case NodeKind::Repeat:
      control_add(a, site_ipu, t_.cc_control);
      for (const auto& ch : n.body) walk_code(ch, a, site_ipu);
      return;
    case NodeKind::If: {
      const int ipu = d_.ops[n.op].placement.ipu;
      const int outer = site_op_;
      site_op_ = n.op;
      control_add(a, ipu, t_.cc_control);
      // The predicate is broadcast to every tile of the IPU.
      TileMap all = tile_set(Placement{ipu, TileSet::Compute});
      all.set_begin = 0;
      all.set_size = all.count = t_.tiles_per_ipu;
      code_add(a, kInternalExchangeCode, all, t_.xc_program);
      // Branch copies are paid here; the branch bodies by their own
      // instance count (one per If site).
      for (const auto& br : n.body)
        for (const auto& ch : br.body)
          if (ch.kind != NodeKind::Call) walk_code(ch, a, ipu);
      site_op_ = outer;
      return;
    }
    case NodeKind::StreamIn:
    case NodeKind::StreamOut: {
      const int t = n.kind == NodeKind::StreamIn ? n.dst : n.src;
      const TileMap& m = mapping(t);
      code_add(a, kHostExchangeCode, m, t_.hxc_program + t_.xc_region);
      code_add(a, kCopyDescriptor, m, t_.copy_descriptor);  // landing pad copy
      control_add(a, d_.ops[n.op].placement.ipu, 2 * (t_.cc_program + t_.cc_sync));
      return;
    }
    case NodeKind::Carry: {
      for (auto& [s, dd] : n.carry_direct) copy_code(a, s, dd, site_ipu);
      for (auto& [s, dd] : n.carry_staged) {
        copy_code(a, s, dd, site_ipu);
        copy_code(a, s, dd, site_ipu);
      }
      return;
    }
  }
}

const Node& Model::body_of(int g) const {
  return g == main_ ? low_.programs[kMainProgram] : low_.functions[low_.fn_of_graph[g]].body;
}

void Model::code_walk() {
  cat_.assign(kNumCategories, std::vector<double>(T_, 0.0));
  site_.assign(d_.ops.size(), SiteCode{});
  site_op_ = -1;
  xseen_.clear();
  xshared_.assign(d_.ops.size(), 0);
  vcover_.assign(vtype_names_.size(), {});
  for (int g : order_) {
    if (inst_[g] == 0) continue;
    int64_t sum = 0;
    Acc a{&cat_, loaded_[g].empty() ? nullptr : &loaded_[g], (double)inst_[g], &sum};
    if (a.loaded) a.w = 1.0;
    if (g == main_) {
      for (int p = 0; p < kNumPrograms; ++p) walk_code(low_.programs[p], a, 0);
    } else {
      walk_code(body_of(g), a, 0);
    }
    r_.graphs[g].code_bytes = sum;
  }
  // Vertex code: once per vertex type per tile (PopLiner, §4.2).
  if (vcover_.size() < vtype_names_.size()) vcover_.resize(vtype_names_.size());
  for (size_t v = 0; v < vtype_names_.size(); ++v) {
    r_.vertex_types[vtype_names_[v]] = vtype_code_[v];
    int64_t tiles = 0;
    if (v < vcover_.size() && !vcover_[v].empty())
      for (int t = 0; t < T_; ++t)
        if (vcover_[v][t]) {
          cat_[kVertexCode][t] += (double)vtype_code_[v];
          ++tiles;
        }
    r_.vertex_type_tiles[vtype_names_[v]] = tiles;
  }
  // Code loads: their cycles, now the loaded code's size is known.
  for (size_t o = 0; o < d_.ops.size(); ++o) {
    const int g = d_.ops[o].code_load_graph;
    if (g < 0) continue;
    double bytes = 0;
    for (double b : loaded_[g]) bytes += b;
    // Each IPU loads its own tiles' code; the slowest IPU counts.
    cost_[o].exchange = stream_cycles((int64_t)(bytes / std::max(1, t_.num_ipus)),
                                      t_.streaming_bytes_per_second);
  }
  // Always-live data, stack and runtime words on every tile.
  for (size_t t = 0; t < d_.tensors.size(); ++t) {
    if (al_.root[t] != (int)t) continue;
    const auto& te = d_.tensors[t];
    if (te.kind == TensorKind::Variable) add_map(cat_[kVariables], map_[t], 1.0);
    else if (te.kind == TensorKind::Constant) add_map(cat_[kConstants], map_[t], 1.0);
  }
  for (int t = 0; t < T_; ++t) cat_[kStack][t] += (double)(t_.stack_bytes + t_.runtime_bytes);
  remote_buffers();
}

// Remote buffers take no tile memory but their landing pads: one per
// buffer, two when a MultiExchange both loads and stores it (§1.6,
// remoteBufferSeparateLoadStorePadsRequired). A pad is written and read
// within one RemoteLoad (entry -> pad -> tensor) or RemoteStore (tensor
// -> pad -> entry), so Poplar's liveness keeps it only during that step
// (a temporary of the step, cost_remote), not always live; the report
// gives each buffer's pad bytes.
void Model::remote_buffers() {
  const size_t nb = d_.remote_buffers.size();
  r_.remote_buffers.assign(nb, RemoteBufferReport{});
  std::map<int, std::pair<std::set<int>, std::set<int>>> group_dirs;  // group -> (loaded, stored)
  for (const auto& op : d_.ops) {
    if (op.remote_buffer < 0 || (size_t)op.remote_buffer >= nb) continue;
    auto& rr = r_.remote_buffers[(size_t)op.remote_buffer];
    const bool load = op.kind == OpKind::RemoteLoad;
    (load ? rr.loads : rr.stores)++;
    if (op.exchange_group >= 0) {
      auto& gd = group_dirs[op.exchange_group];
      (load ? gd.first : gd.second).insert(op.remote_buffer);
    }
  }
  std::set<int> two;
  for (auto& [g, dirs] : group_dirs)
    for (int b : dirs.first)
      if (dirs.second.count(b)) two.insert(b);
  for (size_t b = 0; b < nb; ++b) {
    const auto& rb = d_.remote_buffers[b];
    auto& rr = r_.remote_buffers[b];
    rr.name = rb.name;
    rr.entries = rb.entries;
    rr.entry_bytes = (int64_t)rb.entry_bytes();
    rr.streaming_bytes = rr.entries * rr.entry_bytes;
    if (!pad_mapped_[b]) continue;  // never loaded or stored: no pad
    rr.pads = two.count((int)b) ? 2 : 1;
    rr.pad_bytes = rr.pads * pad_map_[b].total();
  }
}

}  // namespace model
}  // namespace ipuxl
