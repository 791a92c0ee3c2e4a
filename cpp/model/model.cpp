#include "state.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

namespace ipuxl {
namespace model {

const char* category_name(int c) {
  switch (c) {
    case kVertexCode: return "vertexCode";
    case kVertexInstanceState: return "vertexInstanceState";
    case kCopyDescriptor: return "copyDescriptor";
    case kControlCode: return "controlCode";
    case kInternalExchangeCode: return "internalExchangeCode";
    case kHostExchangeCode: return "hostExchangeCode";
    case kGlobalExchangeCode: return "globalExchangeCode";
    case kStack: return "stack";
    case kVariables: return "variables";
    case kConstants: return "constants";
    case kNotAlwaysLive: return "notAlwaysLive";
  }
  return "?";
}

bool category_is_code(int c) {
  return c == kVertexCode || c == kControlCode || c == kInternalExchangeCode ||
         c == kHostExchangeCode || c == kGlobalExchangeCode;
}

void Model::run() {
  order_ = d_.validate(main_);
  al_ = resolve_aliases(d_);
  auto written = written_roots(d_, al_, order_);
  low_ = lower_program(d_, main_, order_, al_, written);
  setup_target();
  collect_binds();
  map_and_cost();
  code_instances();
  code_walk();
  liveness_and_cycles();
  executions();
  finish();
}

// ------------------------------------------------------------ elided copies
// The lowering binds a call site's tensors in place of the callee's
// parameters (a host simulator rebinds pointers per call). On the IPU a
// Function works on fixed tensors, so PopART's AliasZeroCopy can only
// alias a parameter with a caller tensor that is the same at every call
// site; elsewhere the copy is made (§1.3 CallOpx: CopyInput/CopyOutput
// unless aliased).
void Model::collect_binds_in(const Node& n) {
  if (n.kind == NodeKind::Bind)
    for (const auto& it : n.bind)
      if (it.to >= 0 && !it.group.empty())
        bind_src_[al_.root[it.group[0]]].insert(al_.root[it.to]);
  if (n.kind == NodeKind::Copy) {
    if (n.src >= 0) copied_roots_.insert(al_.root[n.src]);
    if (n.dst >= 0) copied_roots_.insert(al_.root[n.dst]);
  }
  for (const auto& ch : n.body) collect_binds_in(ch);
}

void Model::collect_binds() {
  for (const auto& f : low_.functions) collect_binds_in(f.body);
  for (const auto& p : low_.programs) collect_binds_in(p);
  // A call site's tensor that is itself a parameter aliased with its own
  // caller's tensor is that tensor's storage: sites binding such chains
  // to the same storage bind one tensor (PopART aliases the Poplar
  // tensors, whatever the nesting).
  auto canon = [&](int r) {
    for (int hops = 0; hops < 64; ++hops) {
      auto f = bind_src_.find(r);
      if (f == bind_src_.end() || f->second.size() != 1 || copied_roots_.count(r)) break;
      r = *f->second.begin();
    }
    return r;
  };
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& [r, srcs] : bind_src_) {
      if (srcs.size() <= 1) continue;
      std::set<int> c;
      for (int x : srcs) c.insert(canon(x));
      if (c.size() < srcs.size()) srcs = c, changed = true;
    }
  }
  for (const auto& g : d_.graphs)
    for (int t : g.outputs) out_roots_.insert(al_.root[t]);
  // Outputs aliased with their caller's tensor (AliasZeroCopy) hold data
  // only once written: the callee counts them from the op writing them,
  // the caller not during the call. Not when the same caller tensor is
  // also bound to an input (a loop-carried or in-place value, live
  // throughout).
  for (const auto& g : d_.graphs) {
    std::set<int> in_src;
    for (int t : g.inputs) {
      auto f = bind_src_.find(al_.root[t]);
      if (f != bind_src_.end()) in_src.insert(f->second.begin(), f->second.end());
      in_src.insert(al_.root[t]);
    }
    for (int t : g.outputs) {
      const int r = al_.root[t];
      if (!shares_caller_storage(r) || in_src.count(r)) continue;
      if (!in_src.count(*bind_src_.at(r).begin())) held_out_.insert(r);
    }
  }
}

// The copies a Bind node stands for on the IPU: (src, dst) pairs.
std::vector<std::pair<int, int>> Model::bound_copies(const Node& n) const {
  std::vector<std::pair<int, int>> out;
  for (const auto& it : n.bind) {
    if (it.to < 0 || it.group.empty()) continue;
    const int r = al_.root[it.group[0]];
    auto f = bind_src_.find(r);
    if (f == bind_src_.end() || f->second.size() <= 1) continue;  // aliased: no copy
    if (out_roots_.count(r)) out.push_back({r, it.to});
    else out.push_back({it.to, r});
  }
  return out;
}

// ------------------------------------------------------------------ target
void Model::setup_target() {
  Target t = make_target(o_.version);
  if (o_.tiles_per_ipu > 0 && t.name != "cpu") t.tiles_per_ipu = o_.tiles_per_ipu;
  if (o_.bytes_per_tile >= 0 && t.name != "cpu") t.bytes_per_tile = o_.bytes_per_tile;
  if (o_.clock_hz > 0) t.clock_hz = o_.clock_hz;
  if (o_.host_bytes_per_second > 0) t.host_bytes_per_second = o_.host_bytes_per_second;
  if (o_.streaming_bytes_per_second > 0)
    t.streaming_bytes_per_second = o_.streaming_bytes_per_second;
  if (o_.available_memory_proportion > 0)
    t.available_memory_proportion = o_.available_memory_proportion;
  t.num_io_tiles = t.name == "cpu" ? 0 : o_.num_io_tiles;
  if (t.num_io_tiles < 0 || (t.num_io_tiles > 0 && t.num_io_tiles >= t.tiles_per_ipu))
    throw Error("IpuModel: num_io_tiles (" + std::to_string(t.num_io_tiles) +
                ") must be less than tiles_per_ipu (" + std::to_string(t.tiles_per_ipu) + ")");
  int need = 1;
  bool io_used = false;
  for (const auto& op : d_.ops) {
    need = std::max(need, op.placement.ipu + 1);
    io_used |= op.placement.tile_set == TileSet::IO;
  }
  for (const auto& te : d_.tensors) need = std::max(need, te.placement.ipu + 1);
  int pow2 = 1;
  while (pow2 < need) pow2 *= 2;
  if (o_.num_ipus > 0) {
    if (o_.num_ipus < need)
      throw Error("IpuModel: the program places work on " + std::to_string(need) +
                  " IPUs but num_ipus=" + std::to_string(o_.num_ipus));
    t.num_ipus = o_.num_ipus;
  } else {
    t.num_ipus = pow2;  // PopXL asks for 2^ceil(log2(ipus)) (session.py _get_ipu_count)
  }
  if (io_used && t.num_io_tiles == 0)
    r_.warnings.push_back(
        "ops are placed on IO tiles but the model has num_io_tiles=0: they are mapped on the "
        "compute tiles (set IpuModel(num_io_tiles=...))");
  t_ = t;
  r_.target = t;
  T_ = t.total_tiles();
  rotate_.assign((size_t)t.num_ipus * 2, 0);
}

// Times each graph runs in one run of the main program: Repeat multiplies
// by its trip count; an If counts its longer branch (the static estimate).
void Model::executions() {
  const size_t ng = d_.graphs.size();
  std::vector<double> ex(ng, 0.0);
  ex[main_] = 1.0;
  for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
    const int g = *it;
    for (int op_id : d_.graphs[g].ops) {
      const auto& op = d_.ops[op_id];
      if (op.skip) continue;
      if (op.kind == OpKind::Call) ex[op.graphs[0]] += ex[g];
      else if (op.kind == OpKind::Repeat) ex[op.graphs[0]] += ex[g] * (double)op.trip_count;
      else if (op.kind == OpKind::If) {
        int b = gcycles_[op.graphs[1]] > gcycles_[op.graphs[0]] ? op.graphs[1] : op.graphs[0];
        ex[b] += ex[g];
      }
    }
  }
  for (size_t g = 0; g < ng; ++g) {
    r_.graphs[g].executions = ex[g];
    r_.graphs[g].cycles = gcycles_[g];
  }
  // Main-graph ops of the weight programs run with weights_from/to_host.
  r_.ops.assign(d_.ops.size(), OpReport{});
  for (size_t i = 0; i < d_.ops.size(); ++i) {
    const auto& op = d_.ops[i];
    const OpCost& c = cost_[i];
    OpReport& o = r_.ops[i];
    o.op = c.reached ? (int)i : -1;
    o.ipu = op.placement.ipu;
    o.tiles = c.tiles.count;
    o.compute_cycles = c.compute;
    o.exchange_cycles = c.exchange;
    auto it = opcyc_.find((int)i);
    o.cycles = it != opcyc_.end() ? it->second : 0;
    if (op.kind == OpKind::Kernel) o.cycles = c.cycles();
    bool in_main_program = !(op.graph == main_ && (op.context == ExecContext::WeightsFromHost ||
                                                  op.context == ExecContext::WeightsToHost));
    o.executions = in_main_program ? ex[op.graph] : 0.0;
    o.flops = c.flops;
    o.temp_bytes = c.temp * c.tiles.count;
    o.state_bytes = (c.state + c.copy_desc) * c.tiles.count;
    // An op whose exchanges repeat an earlier op's pattern pays no code.
    o.exchange_code_bytes = ((xshared_[i] ? 0 : c.xcode) + c.hxcode + c.gxcode) * c.tiles.count;
    o.control_code_bytes = (int64_t)c.programs * (t_.cc_program + t_.cc_sync) * t_.tiles_per_ipu;
    if (is_site(op.kind)) {
      // A call site's own code (its copies and control programs, one
      // instance of its graph); the callee's body is the callee's.
      o.state_bytes = site_[i].state;
      o.exchange_code_bytes = site_[i].xcode;
      o.control_code_bytes = site_[i].ccode;
    }
    o.plan = c.plan;
    if (!c.vtypes.empty()) o.vertex = vtype_names_[c.vtypes[0]];
  }
}

void Model::finish() {
  for (int t = 0; t < T_; ++t) cat_[kNotAlwaysLive][t] = main_peak_.empty() ? 0.0 : main_peak_[t];
  r_.per_tile = std::move(cat_);
  r_.loaded_code.assign(T_, 0.0);
  for (const auto& l : loaded_)
    for (size_t t = 0; t < l.size(); ++t) r_.loaded_code[t] += l[t];
  r_.main_graph = main_;
  r_.peak_live = peak_list_[main_];
  r_.tensors.assign(d_.tensors.size(), TensorReport{});
  for (size_t t = 0; t < d_.tensors.size(); ++t) {
    auto& tr = r_.tensors[t];
    tr.tensor = (int)t;
    if (al_.root[t] != (int)t || !view_parts_[t].empty()) continue;  // no storage of its own
    const TileMap& m = map_[t];
    tr.ipu = m.ipu;
    tr.first_tile = m.set_begin + m.first;
    tr.tiles = m.count;
    tr.bytes_per_tile = m.per_tile;
    tr.always_live = always_live((int)t);
  }
}

Report analyse(const ProgramDesc& desc, int main, const Options& opts) {
  Report r;
  Model m(desc, main, opts, r);
  m.run();
  return r;
}

}  // namespace model
}  // namespace ipuxl
