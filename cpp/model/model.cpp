#include "model.hpp"

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

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }

// Tiles of one IPU's tile set: `count` consecutive tiles from `first`
// (wrapping within the set), holding `per_tile` bytes each but the last,
// which holds `last`. Also used for where an op runs (bytes unused).
struct TileMap {
  int ipu = 0;
  int set_begin = 0, set_size = 1;
  int first = 0;
  int count = 0;
  int64_t per_tile = 0;
  int64_t last = 0;
  int64_t total() const { return count <= 0 ? 0 : per_tile * (count - 1) + last; }
  int64_t max_tile() const { return count <= 0 ? 0 : std::max(per_tile, last); }
  bool same_tiles(const TileMap& o) const {
    return ipu == o.ipu && set_begin == o.set_begin && first == o.first && count == o.count &&
           per_tile == o.per_tile;
  }
};

// The cost of one op, from its mapping (computed once, used by every code
// instance and execution).
struct OpCost {
  bool reached = false;
  TileMap tiles;              // where it runs
  int64_t compute = 0;        // cycles: the slowest tile's vertices, all compute sets
  int64_t exchange = 0;       // cycles: exchanges and syncs
  double flops = 0;
  std::vector<int> vtypes;    // vertex types on `tiles`
  int64_t state = 0;          // vertex state per tile on `tiles`
  int64_t copy_desc = 0;      // per tile on `tiles`
  int64_t xcode = 0;          // internal exchange code per tile on `tiles`
  int64_t hxcode = 0;         // host exchange code per tile on `tiles`
  int64_t gxcode = 0;         // global exchange code per tile on `tiles`
  int programs = 0;           // leaf programs (control code on every tile of the IPU)
  int64_t temp = 0;           // temporaries per tile on `tiles` while it runs
  int code_load_graph = -1;   // RemoteCodeLoad: the graph whose code it loads
  std::string plan;
  int64_t cycles() const { return compute + exchange; }
};

// A step of a graph's body for liveness and cycles.
struct StepRec {
  const char* kind = "";
  int op = -1;
  int copy_src = -1, copy_dst = -1;
  std::vector<int> touched;       // tensors (any graph)
  std::vector<int> inner;         // graphs whose peaks this step holds (If: the max of them)
  TileMap temp;                   // temporaries (per_tile/last as bytes)
  int64_t cycles = 0;
  int64_t own = 0;                // cycles of the op itself (a call site: without callee bodies)
  int load_graph = -1;            // RemoteCodeLoad: loaded code becomes live here
  std::vector<int> calls;         // graphs this step calls (ends loaded-code liveness)
  int xgroup = -1;                // exchange group (MultiExchange) of its op
  bool io = false;                // runs on the IO tiles, beside compute
};

class Model {
 public:
  Model(const ProgramDesc& d, int main, const Options& o, Report& r)
      : d_(d), main_(main), o_(o), r_(r) {}

  void run() {
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

 private:
  // ------------------------------------------------------------ elided copies
  // The lowering binds a call site's tensors in place of the callee's
  // parameters (a host simulator rebinds pointers per call). On the IPU a
  // Function works on fixed tensors, so PopART's AliasZeroCopy can only
  // alias a parameter with a caller tensor that is the same at every call
  // site; elsewhere the copy is made (§1.3 CallOpx: CopyInput/CopyOutput
  // unless aliased).
  void collect_binds_in(const Node& n) {
    if (n.kind == NodeKind::Bind)
      for (const auto& it : n.bind)
        if (it.to >= 0 && !it.group.empty())
          bind_src_[al_.root[it.group[0]]].insert(al_.root[it.to]);
    for (const auto& ch : n.body) collect_binds_in(ch);
  }
  void collect_binds() {
    for (const auto& f : low_.functions) collect_binds_in(f.body);
    for (const auto& p : low_.programs) collect_binds_in(p);
    for (const auto& g : d_.graphs)
      for (int t : g.outputs) out_roots_.insert(al_.root[t]);
  }
  // The copies a Bind node stands for on the IPU: (src, dst) pairs.
  std::vector<std::pair<int, int>> bound_copies(const Node& n) const {
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
  void setup_target() {
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

  TileMap tile_set(const Placement& p) const {
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

  int& rotation(const TileMap& set) {
    return rotate_[(size_t)set.ipu * 2 + (set.set_begin == 0 && t_.num_io_tiles > 0 &&
                                          set.set_size == t_.num_io_tiles ? 1 : 0)];
  }

  // poputil::calcLinearTileMapping: a grain of one 64-bit vector, at least
  // 128 bytes per tile, as few tiles as that allows up to the whole set;
  // the start rotates across tensors like PopART's LinearMapper (§5.4).
  TileMap linear(int64_t nelms, DType dt, const Placement& p) {
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
  static TileMap spread(const TileMap& where, int64_t tiles, int64_t nelms, int64_t es) {
    TileMap m = where;
    m.count = 0;
    m.per_tile = m.last = 0;
    if (nelms <= 0 || tiles <= 0) return m;
    tiles = std::min<int64_t>(tiles, nelms);
    const int64_t ept = ceil_div(nelms, tiles);
    tiles = ceil_div(nelms, ept);
    m.count = (int)tiles;
    m.per_tile = ept * es;
    m.last = (nelms - ept * (tiles - 1)) * es;
    return m;
  }

  // A range of `count` tiles for an op's own plan, rotating like linear().
  TileMap op_range(const Placement& p, int64_t count) {
    TileMap m = tile_set(p);
    count = std::max<int64_t>(1, std::min<int64_t>(count, m.set_size));
    m.count = (int)count;
    int& rot = rotation(m);
    m.first = rot % m.set_size;
    rot = (int)((rot + count) % m.set_size);
    return m;
  }

  // m with the bytes of a tensor of `es` bytes per element instead of `from_es`.
  static TileMap rescale(TileMap m, int64_t from_es, int64_t es) {
    if (from_es == es || from_es <= 0) return m;
    m.per_tile = m.per_tile / from_es * es;
    m.last = m.last / from_es * es;
    return m;
  }

  template <class F>
  void for_tiles(const TileMap& m, F f) const {
    const int base = m.ipu * t_.tiles_per_ipu + m.set_begin;
    for (int i = 0; i < m.count; ++i) f(base + (m.first + i) % m.set_size, i + 1 == m.count ? m.last : m.per_tile);
  }
  // Adds `each` bytes (times w) to every tile of m's range.
  void add_each(std::vector<double>& v, const TileMap& m, double each) const {
    if (each == 0) return;
    for_tiles(m, [&](int t, int64_t) { v[t] += each; });
  }
  void add_map(std::vector<double>& v, const TileMap& m, double w) const {
    for_tiles(m, [&](int t, int64_t b) { v[t] += w * (double)b; });
  }
  void add_ipu(std::vector<double>& v, int ipu, double each) const {
    if (each == 0) return;
    const int base = ipu * t_.tiles_per_ipu;
    for (int i = 0; i < t_.tiles_per_ipu; ++i) v[base + i] += each;
  }

  // ------------------------------------------------------------ vertex types
  int vtype(const std::string& name, int64_t code_bytes) {
    auto it = vtype_id_.find(name);
    if (it != vtype_id_.end()) return it->second;
    int id = (int)vtype_names_.size();
    vtype_id_[name] = id;
    vtype_names_.push_back(name);
    vtype_code_.push_back(code_bytes);
    return id;
  }

  // ----------------------------------------------------------------- mapping
  bool mapped(int t) const { return mapped_[al_.root[t]]; }
  const TileMap& mapping(int t) const { return map_[al_.root[t]]; }
  void set_map(int t, const TileMap& m) {
    int r = al_.root[t];
    if (mapped_[r]) return;
    map_[r] = m;
    mapped_[r] = 1;
  }
  void ensure_linear(int t) {
    if (t < 0 || mapped(t)) return;
    const auto& te = d_.tensors[al_.root[t]];
    set_map(t, linear(te.nelms(), te.dtype, te.placement));
  }

  // Exchanging `bytes_per_tile` onto `dst` tiles from `src`: cycles and
  // code. Reading a tensor held on another IPU is a global exchange over
  // the IPU-Links.
  struct Xch {
    int64_t cycles = 0;
    int64_t code = 0;     // per destination tile
    bool global = false;
  };
  Xch exchange_in(const TileMap& src, int dst_ipu, int64_t bytes_per_tile, int64_t total_bytes,
                  int share = 1) const {
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

  // poplibs elementwise estimators (§3.1, popops PerformanceEstimation):
  // a supervisor vertex runs 6 workers, each ceil(n/6) elements, in
  // vectors of w (64 bits); the tile interleaves the workers, so tile
  // cycles are 6 x worker cycles plus the supervisor overhead.
  int64_t ew_cycles(int64_t n, int64_t es, int64_t header, int64_t per_vector, int64_t unroll) const {
    if (n <= 0) return 0;
    const int64_t nw = ceil_div(n, t_.workers);
    const int64_t w = unroll > 0 ? unroll : std::max<int64_t>(1, t_.vector_bytes / es);
    return t_.workers * (header + ceil_div(nw, w) * per_vector) + t_.supervisor_cycles;
  }

  struct EwShape {
    int64_t header, per_vector, unroll;
  };
  // Per-op constants: UnaryOp1D `6·(17 (33 exp) + ⌈n/unroll⌉·c) + 9 + 11`,
  // BinaryOp1D `6·(29 fp32 | 26 fp16 + ⌈⌈N/6⌉/w⌉·3) + 11` (§3.1); ops the
  // table does not list are [assumption] by their nearest listed op.
  EwShape ew_shape(const std::string& type, int n_in, bool half) const {
    std::string t = type;
    for (const char* suf : {"LhsInplace", "Inplace"}) {
      size_t n = std::string(suf).size();
      if (t.size() > n && t.compare(t.size() - n, n, suf) == 0) t = t.substr(0, t.size() - n);
    }
    const int64_t w = half ? 4 : 2;
    if (n_in <= 1) {
      if (t == "Exp") return {33 + 9, half ? 4 : 6, half ? 4 : 2};
      if (t == "Tanh") return {17 + 9, half ? 4 : 12, half ? 4 : 2};
      if (t == "Sigmoid") return {17 + 9, half ? 6 : 12, half ? 4 : 2};
      if (t == "Relu") return {17 + 9, 3, w};
      if (t == "Sqrt") return {17 + 9, half ? 23 : 10, half ? 4 : 2};
      if (t == "Log" || t == "Gelu" || t == "GeluErf" || t == "Swish" || t == "Erf" ||
          t == "Sin" || t == "Cos" || t == "Log1p")
        return {33 + 9, half ? 8 : 14, half ? 4 : 2};  // [assumption] like exp + a polynomial
      return {17 + 9, 3, w};
    }
    if (t == "Div") return {half ? 26 : 29, half ? 21 : 10, half ? 4 : 2};
    if (t == "Pow" || t == "Fmod") return {half ? 26 : 29, 20, half ? 4 : 2};  // [assumption]
    if (t == "AdamUpdater" || t == "AdamVarUpdate") return {40, 24, half ? 4 : 2};  // [assumption]
    return {half ? 26 : 29, 3 * std::max(1, n_in - 1), w};
  }

  static std::string base_type(const std::string& type) {
    std::string t = type;
    for (const char* suf : {"LhsInplace", "Inplace"}) {
      size_t n = std::string(suf).size();
      if (t.size() > n && t.compare(t.size() - n, n, suf) == 0) t = t.substr(0, t.size() - n);
    }
    return t;
  }

  // -------------------------------------------------------- mapping + costs
  void map_and_cost() {
    const size_t n = d_.tensors.size();
    map_.assign(n, TileMap{});
    mapped_.assign(n, 0);
    cost_.assign(d_.ops.size(), OpCost{});
    pad_map_.assign(d_.remote_buffers.size(), TileMap{});
    pad_mapped_.assign(d_.remote_buffers.size(), 0);
    // Callees first: a Function's parameters take the layout its body's
    // ops give them (PopART: subgraph inputs are created by their
    // consumers), and callers' tensors unwind through the call.
    for (int g : order_) {
      for (int op_id : d_.graphs[g].ops) {
        const auto& op = d_.ops[op_id];
        cost_op(op_id, op);
      }
      for (int t : d_.graphs[g].inputs) ensure_linear(t);
      for (int t : d_.graphs[g].outputs) ensure_linear(t);
    }
    for (size_t t = 0; t < n; ++t)
      if (al_.root[t] == (int)t && !mapped_[t]) ensure_linear((int)t);
  }

  // Inputs that must be exchanged to the op's tiles: their bytes per tile.
  void inputs_exchange(const OpRecord& op, OpCost& c, const TileMap& out, int64_t out_nelms) {
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

  void cost_op(int op_id, const OpRecord& op) {
    OpCost& c = cost_[op_id];
    c.reached = true;
    const std::string& cls = op.cost_class;
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
      case OpKind::HostStore: {
        int t = op.kind == OpKind::HostLoad ? op.out[0] : op.in[0];
        ensure_linear(t);
        c.tiles = mapping(t);
        return;
      }
      case OpKind::RemoteLoad:
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
    if (cls == "matmul") return cost_matmul(op, c);
    if (cls == "reduce" || cls == "sort" || cls == "scan") return cost_reduce(op, c);
    if (cls == "softmax" || cls == "loss") return cost_softmax(op, c);
    if (cls == "gather") return cost_gather(op, c);
    if (cls == "scatter") return cost_scatter(op, c);
    if (cls == "view" && !op.aliases.empty()) return cost_view(op, c);
    if (cls == "copy" || cls == "view") return cost_copy_op(op, c);
    if (cls == "fill") return cost_fill(op, c);
    if (cls == "print") return cost_print(op, c);
    if (cls == "code_load") return cost_code_load(op, c);
    return cost_elementwise(op, c, cls == "random");
  }

  // The output's layout: aliased (in place) outputs keep their input's;
  // others follow the first input of the same size (poplibs clones the
  // input layout for elementwise outputs), else a linear mapping.
  TileMap output_like_input(const OpRecord& op, int out) {
    const auto& te = d_.tensors[out];
    if (!mapped(out)) {
      for (int t : op.in) {
        if (t < 0) continue;
        ensure_linear(t);
        const auto& ti = d_.tensors[t];
        if (ti.nelms() == te.nelms() && mapping(t).ipu == op.placement.ipu && mapping(t).count) {
          set_map(out, rescale(mapping(t), (int64_t)dtype_size(ti.dtype), (int64_t)dtype_size(te.dtype)));
          break;
        }
      }
      if (!mapped(out)) set_map(out, linear(te.nelms(), te.dtype, op.placement));
    }
    return mapping(out);
  }

  void cost_view(const OpRecord& op, OpCost& c) {
    for (int t : op.in) ensure_linear(t);
    for (int t : op.out) ensure_linear(t);  // aliases: the input's mapping
    c.tiles = op.out.empty() ? tile_set(op.placement) : mapping(op.out[0]);
    c.tiles.count = 0;  // no program: a view of the input's storage
  }

  void cost_elementwise(const OpRecord& op, OpCost& c, bool random) {
    for (int t : op.in) ensure_linear(t);
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
      vname = "poprand::" + base_type(op.type) + "<" + dtype_name(te.dtype) + ">";
    } else {
      EwShape s = ew_shape(op.type, n_in, half);
      c.compute = ew_cycles(n_t, es, s.header, s.per_vector, s.unroll);
      vname = std::string(n_in <= 1 ? "popops::UnaryOp<" : "popops::BinaryOp<") +
              base_type(op.type) + "," + dtype_name(te.dtype) + ">";
    }
    c.flops = (double)te.nelms();
    c.vtypes.push_back(vtype(vname, n_in <= 1 ? 300 : 400));
    c.state = 4 * (n_in + (int64_t)op.out.size()) + 4;  // a pointer per operand, a size
    c.programs += 1;
  }

  // popops::reduce: each input tile reduces its part into fp32 partials,
  // the partials are exchanged to the output's tiles and reduced again
  // (two compute sets and an exchange). TopK/ArgMax/CumSum are costed alike.
  void cost_reduce(const OpRecord& op, OpCost& c) {
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
    const int64_t per_vector = op.cost_class == "sort" ? 3 : op.cost_class == "scan" ? 4 : 2;
    c.tiles = im.count >= om.count ? im : om;
    c.compute = ew_cycles(n_in_t, es, 20, per_vector, 0);
    const std::string bt = base_type(op.type);
    c.vtypes.push_back(vtype("popops::Reduce<" + bt + "," + dtype_name(ti.dtype) + ">", 600));
    c.state = 24;
    c.programs += 1;
    c.flops = (double)ti.nelms();
    const int64_t partials_t = std::min(out_n, n_in_t);  // per input tile
    if (im.count > 1 && partials_t < ti.nelms()) {
      const int64_t total = partials_t * im.count;
      const int64_t recv_t = om.count ? ceil_div(total, om.count) * 4 : 0;
      Xch x = exchange_in(im, om.ipu, std::max(recv_t, partials_t * 4), total * 4);
      c.exchange += x.cycles;
      c.xcode += x.code + t_.xc_region * std::min<int64_t>(im.count, 64);
      c.compute += ew_cycles(ceil_div(total, std::max(1, om.count)), 4, 20, 2, 0);
      c.vtypes.push_back(vtype("popops::ReducePartials<" + bt + ",float>", 400));
      c.state += 24;
      c.programs += 2;
      c.temp += partials_t * 4 + recv_t;
    }
  }

  // Softmax (popnn) and the losses built on it: a max and a sum reduction
  // along rows and two elementwise passes (sub+exp, divide).
  void cost_softmax(const OpRecord& op, OpCost& c) {
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
    if (op.cost_class == "loss") c.vtypes.push_back(vtype("popnn::LossTransform<" + dn + ">", 500));
    c.state = 4 * 24;
    c.programs += 4;
    c.flops = 5.0 * (double)ti.nelms();
    c.temp += n_t * es + std::min<int64_t>(rows, n_t) * 8;
  }

  // popops::multiSlice / dynamicSlice: the output, mapped linearly, pulls
  // its rows from wherever the table lives.
  void cost_gather(const OpRecord& op, OpCost& c) {
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

  // popops::multiUpdate / dynamicUpdate: updates exchanged to the tiles of
  // the updated tensor, then written in place.
  void cost_scatter(const OpRecord& op, OpCost& c) {
    for (int t : op.in) ensure_linear(t);
    if (op.out.empty()) return cost_elementwise(op, c, false);
    TileMap m = output_like_input(op, op.out[0]);
    c.tiles = m;
    int64_t upd_bytes = 0;
    for (size_t i = 1; i < op.in.size(); ++i)
      if (op.in[i] >= 0) upd_bytes = std::max<int64_t>(upd_bytes, (int64_t)d_.tensors[op.in[i]].nbytes());
    const int64_t bytes_t = std::min<int64_t>(upd_bytes, std::max<int64_t>(m.max_tile(), ceil_div(upd_bytes, std::max(1, m.count)) * 2));
    const TileMap& src = op.in.size() > 1 && op.in[1] >= 0 ? mapping(op.in[1]) : m;
    Xch x = exchange_in(src, m.ipu, bytes_t, upd_bytes);
    c.exchange += x.cycles;
    (x.global ? c.gxcode : c.xcode) += x.code + t_.xc_region * 8;
    c.compute = t_.supervisor_cycles + 6 * (24 + ceil_div(ceil_div(bytes_t, t_.workers), t_.memcpy_bytes_per_cycle));
    if (op.aliases.empty())  // out of place: the input is copied first
      c.compute += ceil_div(m.max_tile(), t_.memcpy_bytes_per_cycle);
    c.vtypes.push_back(vtype(std::string("popops::MultiUpdate<") + dtype_name(d_.tensors[op.out[0]].dtype) + ">", 600));
    c.state = 32;
    c.programs += 2;
    c.temp += bytes_t;
  }

  // Data movement: reshape/identity keep the layout (an on-tile copy);
  // transpose, slice, concat and split produce a new linear layout and
  // exchange the data.
  void cost_copy_op(const OpRecord& op, OpCost& c) {
    for (int t : op.in) ensure_linear(t);
    const std::string bt = base_type(op.type);
    const bool keeps = bt == "Reshape" || bt == "Identity" || bt == "Detach" || bt == "Flatten";
    int64_t out_bytes = 0;
    for (int t : op.out) {
      if (keeps) output_like_input(op, t);
      else ensure_linear_at(t, op.placement);
      out_bytes += (int64_t)d_.tensors[t].nbytes();
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
    c.compute = cc.compute;
    c.exchange = cc.exchange;
    c.copy_desc = cc.on_tile ? t_.copy_descriptor : 0;
    (cc.global ? c.gxcode : c.xcode) += cc.code;
    c.programs += 1;
  }

  void ensure_linear_at(int t, const Placement& p) {
    if (t < 0 || mapped(t)) return;
    const auto& te = d_.tensors[t];
    set_map(t, linear(te.nelms(), te.dtype, p));
  }

  void cost_fill(const OpRecord& op, OpCost& c) {
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

  void cost_print(const OpRecord& op, OpCost& c) {
    for (int t : op.in) ensure_linear(t);
    for (int t : op.out) output_like_input(op, t);
    if (op.in.empty() || op.in[0] < 0) return;
    const TileMap& m = mapping(op.in[0]);
    c.tiles = m;
    c.exchange = stream_cycles((int64_t)d_.tensors[op.in[0]].nbytes(), t_.host_bytes_per_second);
    c.hxcode = t_.hxc_program + t_.xc_region;
    c.programs += 2;
  }

  void cost_code_load(const OpRecord& op, OpCost& c) {
    c.tiles = tile_set(op.placement);
    c.tiles.count = c.tiles.set_size;
    c.hxcode = t_.hxc_program;
    c.programs += 1;
    for (auto& [o, g] : o_.code_loads)
      if (&d_.ops[o] == &op) c.code_load_graph = g;
    // Cycles are set once the loaded code's size is known (code_walk).
  }

  // RemoteLoad = Copy(buffer entry -> landing pad), Copy(pad -> out);
  // RemoteStore = Copy(in -> pad), Copy(pad -> buffer entry) (§1.6): a
  // global sync, the bytes at the streaming bandwidth, an on-tile pad copy.
  // The first user's layout is the pad's (§1.6: a clone of it).
  void cost_remote(const OpRecord& op, OpCost& c) {
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
  void cost_collective(const OpRecord& op, OpCost& c) {
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

  int64_t stream_cycles(int64_t bytes, double bytes_per_second) const {
    const double bpc = bytes_per_second / t_.clock_hz;
    return t_.sync_global_cycles + (int64_t)std::ceil((double)bytes / bpc);
  }

  struct CopyCost {
    int64_t compute = 0, exchange = 0, code = 0;
    bool on_tile = false, global = false;
  };
  // A Copy program: an on-tile copy when both tensors have the same tiles,
  // else an exchange (4 B/cycle per tile), or a global exchange between IPUs.
  CopyCost copy_cost(const TileMap& src, const TileMap& dst, int64_t bytes) const {
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

  // ------------------------------------------------------------------ matmul
  struct Plan {
    int64_t pg = 1, pm = 1, pn = 1, pk = 1;
    int64_t compute = 0, exch_in = 0, exch_out = 0, reduce = 0;
    int64_t a_t = 0, b_t = 0, partial_t = 0, recv_t = 0, b_resident_t = 0;
    int64_t state = 0, xcode = 0;
    int64_t tiles() const { return pg * pm * pn * pk; }
    int64_t cycles() const { return compute + exch_in + exch_out + reduce; }
  };

  // Values v in [1, x] giving distinct ceil(x / v), thinned to at most 40.
  static std::vector<int64_t> splits(int64_t x, int64_t cap) {
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
    if (v.size() > 40) {
      std::vector<int64_t> thin;
      for (size_t i = 0; i < 40; ++i) thin.push_back(v[i * (v.size() - 1) / 39]);
      thin.erase(std::unique(thin.begin(), thin.end()), thin.end());
      v = thin;
    }
    return v;
  }

  // A poplin-like plan: the output's rows (M), columns (N, in groups of the
  // AMP's output channels) and the contraction (K, in groups of its input
  // channels) split over tiles; the plan with the fewest estimated cycles
  // whose temporaries fit the available memory proportion of a tile wins
  // (poplin's planner minimises cycles under a memory constraint).
  Plan plan_matmul(int64_t G, bool grouped, int64_t M, int64_t K, int64_t N, DType dt,
                   int64_t tiles, bool a_resident, bool b_resident, double amp) {
    const bool half = dt == DType::Float16;
    const int64_t es = (int64_t)dtype_size(dt);
    const int64_t outG = half ? t_.amp_out_fp16 : t_.amp_out_fp32;
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
    for (int64_t pg : cg)
      for (int64_t pm : cm)
        for (int64_t pn : cn) {
          if (pg * pm * pn > tiles) continue;
          for (int64_t pk : ck) {
            if (pg * pm * pn * pk > tiles) continue;
            Plan p;
            p.pg = pg, p.pm = pm, p.pn = pn, p.pk = pk;
            const int64_t g = grouped ? ceil_div(G, pg) : 1;
            const int64_t m = ceil_div(rows_all, pm);
            const int64_t n = std::min(N, ceil_div(ng, pn) * outG);
            const int64_t k = std::min(K, ceil_div(kg, pk) * inG);
            const int64_t passes = g * ceil_div(n, outG) * ceil_div(k, inG);
            const int64_t nw = ceil_div(m, t_.workers);
            // ConvPartial1x1Out worker cycles (§3.1): fp32 46 + (n-3)*8,
            // fp16 34 + (n-3)*4 for n >= 3; nx1 figures below that.
            int64_t wc;
            if (nw >= 3) wc = (half ? 34 : 46) + (nw - 3) * ec;
            else if (nw == 2) wc = half ? 33 : 44;
            else wc = half ? 29 : 33;
            p.compute = 50 + passes * (t_.workers * wc + wload + 15);
            p.a_t = a_resident ? 0 : g * m * k * es;
            p.b_resident_t = g * k * n * es;
            p.b_t = b_resident && pm == 1 ? 0 : g * k * n * es;
            p.exch_in = t_.sync_internal_cycles +
                        ceil_div(p.a_t, t_.exchange_bytes_per_cycle * (pn > 1 ? 2 : 1)) +
                        ceil_div(p.b_t, t_.exchange_bytes_per_cycle * (pm > 1 ? 2 : 1));
            const int64_t used = p.tiles();
            if (pk > 1) {
              const int64_t E = G * M * N;
              const int64_t e_t = ceil_div(E, used);
              p.partial_t = g * m * n * 4;
              p.recv_t = e_t * pk * 4;
              p.exch_out = t_.sync_internal_cycles +
                           ceil_div(std::max(p.partial_t, p.recv_t), t_.exchange_bytes_per_cycle);
              p.reduce = ew_cycles(e_t * pk, 4, 20, 2, 0);
            }
            const double mem = (double)(p.a_t + p.b_t + p.partial_t + p.recv_t + (b_resident ? p.b_resident_t : 0));
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
            (void)K;
          }
        }
    Plan p = have ? best : small;
    // Vertex state: the AMP vertex's worklists (a pointer per input- and
    // output-channel group, one entry per worker) and, when K is split,
    // the partials' reduction vertex (§5.5 form).
    const int64_t g = grouped ? ceil_div(G, p.pg) : 1;
    const int64_t n = std::min(N, ceil_div(ng, p.pn) * outG);
    const int64_t k = std::min(K, ceil_div(kg, p.pk) * inG);
    p.state = 32 + 4 * g * (ceil_div(k, inG) + ceil_div(n, outG)) + 4 * t_.workers + (p.pk > 1 ? 32 : 0);
    const int64_t m = ceil_div(rows_all, p.pm);
    p.xcode = t_.xc_program + t_.xc_region * (g * m + 1) +
              (p.pk > 1 ? t_.xc_program + t_.xc_region * (p.pk + 1) : 0);
    return p;
  }

  void cost_matmul(const OpRecord& op, OpCost& c) {
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
    const bool grouped = gb > 1;
    const bool a_res = !mapped(op.in[0]);
    const bool b_res = !mapped(op.in[1]);
    const TileMap set = tile_set(op.placement);
    const double amp = op.attrs.has("available_memory_proportion")
                           ? op.attrs.f("available_memory_proportion")
                           : t_.available_memory_proportion;
    char key[256];
    snprintf(key, sizeof key, "%lld,%d,%lld,%lld,%lld,%d,%d,%d,%d,%g", (long long)G, (int)grouped,
             (long long)M, (long long)K, (long long)N, (int)A.dtype, set.set_size, (int)a_res,
             (int)b_res, amp);
    auto it = plans_.find(key);
    if (it == plans_.end())
      it = plans_.emplace(key, plan_matmul(G, grouped, M, K, N, A.dtype, set.set_size, a_res, b_res, amp)).first;
    const Plan& p = it->second;
    TileMap range = op_range(op.placement, p.tiles());
    const int64_t es = (int64_t)dtype_size(A.dtype);
    // Creator layouts: operands nobody laid out yet are created by the
    // matmul (PopART InputCreatorType::CanCreate), spread over the tiles of
    // the first row (A) / column (B) slice of the plan.
    if (b_res) set_map(op.in[1], spread(range, p.pg * p.pn * p.pk, B.nelms(), es));
    if (a_res) set_map(op.in[0], spread(range, p.pg * p.pm * p.pk, A.nelms(), es));
    set_map(op.out[0], spread(range, p.tiles(), O.nelms(), (int64_t)dtype_size(O.dtype)));
    c.tiles = range;
    c.compute = p.compute + p.reduce;
    c.exchange = p.exch_in + p.exch_out;
    // A held on another IPU comes over the IPU-Links first.
    for (int i = 0; i < 2; ++i)
      if (mapping(op.in[i]).ipu != op.placement.ipu) {
        Xch x = exchange_in(mapping(op.in[i]), op.placement.ipu, 1, (int64_t)d_.tensors[op.in[i]].nbytes());
        c.exchange += x.cycles;
        c.gxcode += x.code;
      }
    c.flops = 2.0 * (double)G * (double)M * (double)N * (double)K;
    const std::string dn = dtype_name(A.dtype);
    c.vtypes.push_back(vtype("poplin::ConvPartial1x1Out<" + dn + ",float>",
                             A.dtype == DType::Float16 ? 1200 : 1400));
    if (p.pk > 1) c.vtypes.push_back(vtype("popops::ReduceAdd<float," + dn + ">", 600));
    c.state = p.state;
    c.xcode = p.xcode;
    c.programs = 2 + (p.pk > 1 ? 2 : 0);
    c.temp = p.a_t + p.b_t + p.partial_t + p.recv_t;
    char buf[160];
    snprintf(buf, sizeof buf, "tiles %lld = groups %lld x rows %lld x cols %lld x k %lld",
             (long long)p.tiles(), (long long)p.pg, (long long)p.pm, (long long)p.pn,
             (long long)p.pk);
    c.plan = buf;
  }

  // --------------------------------------------------------- code instances
  // How many copies of each graph's code the program holds: a graph called
  // by Call/Repeat is one Function (1); each If site inlines its branch
  // graphs (IfOpx::callBranch adds the branch's sequences in place, §1.3).
  void code_instances() {
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
    for (auto& [o, g] : o_.code_loads) {
      if (o < 0 || o >= (int)d_.ops.size() || g < 0 || g >= (int)ng)
        throw Error("IpuModel: bad code_loads entry");
      if (loaded_[g].empty()) loaded_[g].assign(T_, 0.0);
      r_.graphs[g].code_loaded = true;
    }
  }

  // -------------------------------------------------------------- code walk
  struct Acc {
    std::vector<std::vector<double>>* cat;
    std::vector<double>* loaded;  // code-loaded graph: its control/exchange code
    double w;
    int64_t* sum;                 // code bytes of one instance, all tiles
  };

  void code_add(Acc& a, int category, const TileMap& m, int64_t each) {
    if (each == 0 || m.count == 0) return;
    const bool movable = a.loaded && (category == kControlCode || category == kInternalExchangeCode ||
                                      category == kHostExchangeCode || category == kGlobalExchangeCode);
    add_each(movable ? *a.loaded : (*a.cat)[category], m, a.w * (double)each);
    *a.sum += each * m.count;
  }
  void control_add(Acc& a, int ipu, int64_t each) {
    if (each == 0) return;
    add_ipu(a.loaded ? *a.loaded : (*a.cat)[kControlCode], ipu, a.w * (double)each);
    *a.sum += each * t_.tiles_per_ipu;
  }
  void mark_vertices(const OpCost& c) {
    for (int v : c.vtypes) {
      if ((size_t)v >= vcover_.size()) vcover_.resize((size_t)v + 1);
      auto& cov = vcover_[v];
      if (cov.empty()) cov.assign(T_, 0);
      for_tiles(c.tiles, [&](int t, int64_t) { cov[t] = 1; });
    }
  }

  void copy_code(Acc& a, int src, int dst, int ipu) {
    const TileMap& s = mapping(src);
    const TileMap& d = mapping(dst);
    CopyCost cc = copy_cost(s, d, (int64_t)d_.tensors[dst].nbytes());
    if (cc.on_tile) {
      code_add(a, kCopyDescriptor, d, t_.copy_descriptor);
    } else if (cc.global) {
      code_add(a, kGlobalExchangeCode, s, cc.code);
      code_add(a, kGlobalExchangeCode, d, cc.code);
    } else {
      code_add(a, kInternalExchangeCode, s, cc.code);
      code_add(a, kInternalExchangeCode, d, cc.code);
    }
    control_add(a, ipu, t_.cc_program + t_.cc_sync);
  }

  void walk_code(const Node& n, Acc& a, int site_ipu) {
    switch (n.kind) {
      case NodeKind::Sequence: {
        int ipu = n.op >= 0 ? d_.ops[n.op].placement.ipu : site_ipu;
        for (const auto& ch : n.body) walk_code(ch, a, ipu);
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

  const Node& body_of(int g) const {
    return g == main_ ? low_.programs[kMainProgram] : low_.functions[low_.fn_of_graph[g]].body;
  }

  void code_walk() {
    cat_.assign(kNumCategories, std::vector<double>(T_, 0.0));
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
    for (auto& [o, g] : o_.code_loads) {
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
  // remoteBufferSeparateLoadStorePadsRequired). Pads are always live.
  void remote_buffers() {
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
      add_map(cat_[kVariables], pad_map_[b], (double)rr.pads);
    }
  }

  // ----------------------------------------------------- liveness + cycles
  bool always_live(int t) const {
    const auto k = d_.tensors[al_.root[t]].kind;
    return k == TensorKind::Variable || k == TensorKind::Constant;
  }

  int64_t copy_cycles(int src, int dst) const {
    CopyCost cc = copy_cost(mapping(src), mapping(dst), (int64_t)d_.tensors[dst].nbytes());
    return cc.compute + cc.exchange;
  }

  int64_t seq_cycles(const Node& n, bool callees = true) const {
    int64_t c = 0;
    for (const auto& ch : n.body) {
      switch (ch.kind) {
        case NodeKind::Copy: c += copy_cycles(ch.src, ch.dst); break;
        case NodeKind::Call:
          c += t_.call_cycles + (callees ? gcycles_[low_.functions[ch.fn].graph] : 0);
          break;
        case NodeKind::Carry:
          for (auto& [s, d] : ch.carry_direct) c += copy_cycles(s, d);
          for (auto& [s, d] : ch.carry_staged) c += 2 * copy_cycles(s, d);
          break;
        case NodeKind::Sequence: c += seq_cycles(ch, callees); break;
        case NodeKind::Bind:
          for (auto& [s, d] : bound_copies(ch)) c += copy_cycles(s, d);
          break;
        default: break;
      }
    }
    return c;
  }

  bool on_io_tiles(const OpRecord& op) const {
    return t_.num_io_tiles > 0 && op.placement.tile_set == TileSet::IO;
  }
  // The members of one MultiExchange are consecutive steps: one exchange,
  // so only the first pays the sync.
  void merged_sync(StepRec& s, const OpRecord& op, const std::vector<StepRec>& out) const {
    s.xgroup = op.exchange_group;
    if (s.xgroup < 0 || out.empty() || out.back().xgroup != s.xgroup) return;
    const int64_t sync = std::min(s.cycles, t_.sync_global_cycles);
    s.cycles -= sync;
    s.own -= std::min(s.own, sync);
  }

  // Leaf steps of a graph body, in program order; a call site's copies are
  // steps of their own, its Call one step holding the callee's peak.
  void flatten(const Node& n, std::vector<StepRec>& out, int site_op) {
    switch (n.kind) {
      case NodeKind::Sequence: {
        int site = n.op >= 0 ? n.op : site_op;
        for (const auto& ch : n.body) flatten(ch, out, site);
        return;
      }
      case NodeKind::RemoteLoad:   // a leaf program like Execute: its cost is the op's
      case NodeKind::RemoteStore:
      case NodeKind::Collective:
      case NodeKind::Execute: {
        StepRec s;
        s.kind = n.kind == NodeKind::Execute      ? "Execute"
                 : n.kind == NodeKind::Collective ? "Collective"
                                                  : "RemoteCopy";
        s.op = n.op;
        const auto& op = d_.ops[n.op];
        s.touched = op.in;
        s.touched.insert(s.touched.end(), op.out.begin(), op.out.end());
        const OpCost& c = cost_[n.op];
        s.temp = c.tiles;
        s.temp.per_tile = s.temp.last = c.temp;
        s.cycles = s.own = c.cycles();
        s.load_graph = c.code_load_graph;
        s.io = on_io_tiles(op);
        merged_sync(s, op, out);
        out.push_back(std::move(s));
        return;
      }
      case NodeKind::Copy: {
        StepRec s;
        s.kind = n.inter_ipu ? "IpuCopy" : "Copy";
        s.op = n.inter_ipu ? n.op : site_op;
        s.copy_src = n.src;
        s.copy_dst = n.dst;
        s.touched = {n.src, n.dst};
        s.cycles = s.own = copy_cycles(n.src, n.dst);
        out.push_back(std::move(s));
        return;
      }
      case NodeKind::Bind: {
        auto copies = bound_copies(n);
        if (copies.empty()) return;
        StepRec s;
        s.kind = "Copy";
        s.op = site_op;
        for (auto& [a, b] : copies) {
          s.touched.push_back(a), s.touched.push_back(b);
          s.cycles += copy_cycles(a, b);
        }
        s.copy_src = copies[0].first;
        s.copy_dst = copies[0].second;
        s.own = s.cycles;
        out.push_back(std::move(s));
        return;
      }
      case NodeKind::Call: {
        StepRec s;
        s.kind = "Call";
        s.op = site_op;
        const int g = low_.functions[n.fn].graph;
        s.inner = {g};
        s.calls = {g};
        if (site_op >= 0) {
          const auto& op = d_.ops[site_op];
          s.touched = op.in;
          s.touched.insert(s.touched.end(), op.out.begin(), op.out.end());
        }
        s.cycles = t_.call_cycles + gcycles_[g];
        s.own = t_.call_cycles;
        out.push_back(std::move(s));
        return;
      }
      case NodeKind::Repeat: {
        StepRec s;
        s.kind = "Repeat";
        s.op = site_op;
        const Node& body = n.body[0];
        for (const auto& ch : body.body)
          if (ch.kind == NodeKind::Call) {
            s.inner.push_back(low_.functions[ch.fn].graph);
            s.calls.push_back(low_.functions[ch.fn].graph);
          }
        if (site_op >= 0) {
          const auto& op = d_.ops[site_op];
          s.touched = op.in;
          s.touched.insert(s.touched.end(), op.out.begin(), op.out.end());
        }
        s.cycles = n.count * (t_.loop_cycles + seq_cycles(body));
        s.own = n.count * (t_.loop_cycles + seq_cycles(body, false));
        out.push_back(std::move(s));
        return;
      }
      case NodeKind::If: {
        StepRec s;
        s.kind = "If";
        s.op = n.op;
        const auto& op = d_.ops[n.op];
        s.touched = op.in;
        s.touched.insert(s.touched.end(), op.out.begin(), op.out.end());
        int64_t best = 0, best_own = 0;
        for (const auto& br : n.body) {
          const int64_t bc = seq_cycles(br);
          if (bc >= best) best = bc, best_own = seq_cycles(br, false);
          for (const auto& ch : br.body)
            if (ch.kind == NodeKind::Call) s.inner.push_back(low_.functions[ch.fn].graph);
        }
        s.calls = s.inner;
        s.cycles = t_.if_cycles + t_.sync_internal_cycles + best;
        s.own = t_.if_cycles + t_.sync_internal_cycles + best_own;
        out.push_back(std::move(s));
        return;
      }
      case NodeKind::StreamIn:
      case NodeKind::StreamOut: {
        StepRec s;
        s.kind = "StreamCopy";
        s.op = n.op;
        const int t = n.kind == NodeKind::StreamIn ? n.dst : n.src;
        s.touched = {t};
        // The landing pad (a clone of the tensor) is live for the step.
        s.temp = mapping(t);
        const int64_t bytes = (int64_t)d_.tensors[t].nbytes();
        s.cycles = stream_cycles(bytes, t_.host_bytes_per_second) +
                   t_.supervisor_cycles + ceil_div(mapping(t).max_tile(), t_.memcpy_bytes_per_cycle);
        s.own = s.cycles;
        s.io = on_io_tiles(d_.ops[n.op]);
        merged_sync(s, d_.ops[n.op], out);
        out.push_back(std::move(s));
        return;
      }
      case NodeKind::Carry: {
        StepRec s;
        s.kind = "Copy";
        s.op = site_op;
        for (auto& [a, b] : n.carry_direct) {
          s.touched.push_back(a), s.touched.push_back(b);
          s.cycles += copy_cycles(a, b);
        }
        for (auto& [a, b] : n.carry_staged) {
          s.touched.push_back(a), s.touched.push_back(b);
          s.cycles += 2 * copy_cycles(a, b);
        }
        s.own = s.cycles;
        out.push_back(std::move(s));
        return;
      }
    }
  }

  void liveness_and_cycles() {
    const size_t ng = d_.graphs.size();
    peak_.assign(ng, {});
    gcycles_.assign(ng, 0);
    std::vector<double> cur(T_), step(T_);
    for (int g : order_) {
      std::vector<StepRec> steps;
      flatten(body_of(g), steps, -1);
      const auto& gd = d_.graphs[g];
      // Births and deaths of this graph's not-always-live storage roots.
      std::unordered_map<int, std::pair<int, int>> span;  // root -> (first, last)
      const int S = (int)steps.size();
      auto touch = [&](int t, int s) {
        if (t < 0) return;
        const int r = al_.root[t];
        if (d_.tensors[r].graph != g || always_live(r)) return;
        auto it = span.find(r);
        if (it == span.end()) span.emplace(r, std::make_pair(s, s));
        else it->second.second = std::max(it->second.second, s);
      };
      for (int s = 0; s < S; ++s)
        for (int t : steps[s].touched) touch(t, s);
      // A Function's parameters are allocated once and live for its whole
      // body (§4.4: "Subgraph inputs and outputs are separate tensors
      // allocated once").
      if (g != main_) {
        for (int t : gd.inputs) touch(t, 0), touch(t, std::max(0, S - 1));
        for (int t : gd.outputs) touch(t, 0), touch(t, std::max(0, S - 1));
      }
      std::vector<std::vector<int>> births(S + 1), deaths(S + 1);
      std::vector<int> roots;
      roots.reserve(span.size());
      for (auto& kv : span) roots.push_back(kv.first);
      std::sort(roots.begin(), roots.end());
      for (int r : roots) {
        births[span[r].first].push_back(r);
        deaths[span[r].second].push_back(r);
      }
      // Loaded code: live from its load to the last step calling the graph.
      std::vector<std::pair<int, int>> code_spans;  // (graph, last step)
      std::map<int, int> load_step;
      for (int s = 0; s < S; ++s) {
        if (steps[s].load_graph >= 0 && !load_step.count(steps[s].load_graph))
          load_step[steps[s].load_graph] = s;
      }
      std::map<int, int> load_end;
      for (auto& [lg, s0] : load_step) {
        int end = s0;
        for (int s = s0; s < S; ++s)
          for (int cg : steps[s].calls)
            if (cg == lg) end = s;
        load_end[lg] = end;
      }
      std::fill(cur.begin(), cur.end(), 0.0);
      std::vector<double> peak(T_, 0.0);
      double cur_sum = 0;
      int64_t cyc = 0;
      // IO tiles: a lane beside compute. An IO step starts once issued (and
      // the lane is free); a later step touching its tensors waits for it.
      int64_t io_free = 0;
      std::unordered_map<int, int64_t> io_ready;  // storage root -> end of its IO step
      for (int s = 0; s < S; ++s) {
        StepRec& st = steps[s];
        for (int r : births[s]) {
          add_map(cur, map_[r], 1.0);
          cur_sum += (double)map_[r].total();
        }
        for (auto& [lg, s0] : load_step)
          if (s0 == s) {
            for (int t = 0; t < T_; ++t) cur[t] += loaded_[lg][t];
            for (double b : loaded_[lg]) cur_sum += b;
          }
        std::copy(cur.begin(), cur.end(), step.begin());
        double extra = 0;
        if (st.temp.count > 0) {
          add_map(step, st.temp, 1.0);
          extra += (double)st.temp.total();
        }
        // Tensors of other graphs a step touches (a callee's parameters at
        // its call site's copies) are live for the step.
        for (int t : st.touched) {
          if (t < 0) continue;
          const int r = al_.root[t];
          if (d_.tensors[r].graph == g || always_live(r)) continue;
          add_map(step, map_[r], 1.0);
          extra += (double)map_[r].total();
        }
        if (!st.inner.empty()) {
          // One callee runs at a time: the step holds the largest peak per
          // tile (a Repeat's body, or either branch of an If).
          std::vector<double> in(T_, 0.0);
          for (int cg : st.inner)
            if (!peak_[cg].empty())
              for (int t = 0; t < T_; ++t) in[t] = std::max(in[t], (double)peak_[cg][t]);
          for (int t = 0; t < T_; ++t) {
            step[t] += in[t];
            extra += in[t];
          }
        }
        double mx = 0;
        for (int t = 0; t < T_; ++t) {
          peak[t] = std::max(peak[t], step[t]);
          mx = std::max(mx, step[t]);
        }
        if (st.io) {
          const int64_t start = std::max(cyc, io_free);
          io_free = start + st.cycles;
          for (int t : st.touched)
            if (t >= 0) io_ready[al_.root[t]] = io_free;
        } else {
          int64_t start = cyc;
          if (!io_ready.empty())
            for (int t : st.touched) {
              if (t < 0) continue;
              auto it = io_ready.find(al_.root[t]);
              if (it != io_ready.end()) start = std::max(start, it->second);
            }
          cyc = start + st.cycles;
        }
        if (g == main_) {
          Step out;
          out.kind = st.kind;
          out.op = st.op;
          out.cycles = st.cycles;
          out.live_bytes = (int64_t)(cur_sum + extra);
          out.max_tile_live = (int64_t)mx;
          if ((st.kind == std::string("Copy") || st.kind == std::string("IpuCopy")) &&
              st.copy_src >= 0)
            out.label = d_.tensors[st.copy_src].name + " -> " + d_.tensors[st.copy_dst].name;
          else if (st.op >= 0)
            out.label = d_.ops[st.op].name;
          r_.steps.push_back(std::move(out));
        }
        // Per-op cycles: Execute steps are the op; copies, calls and loops
        // of a call site belong to the site's op.
        if (st.op >= 0) opcyc_[st.op] += st.own;
        for (int r : deaths[s]) {
          add_map(cur, map_[r], -1.0);
          cur_sum -= (double)map_[r].total();
        }
        for (auto& [lg, e] : load_end)
          if (e == s) {
            for (int t = 0; t < T_; ++t) cur[t] -= loaded_[lg][t];
            for (double b : loaded_[lg]) cur_sum -= b;
          }
      }
      gcycles_[g] = std::max(cyc, io_free);
      peak_[g].assign(peak.begin(), peak.end());
      if (g == main_) main_peak_ = peak;
    }
    r_.total_cycles = gcycles_[main_];
    auto prog_cycles = [&](int p) {
      std::vector<StepRec> steps;
      flatten(low_.programs[p], steps, -1);
      int64_t c = 0;
      for (auto& s : steps) c += s.cycles;
      return c;
    };
    r_.weights_from_host_cycles = prog_cycles(kWeightsFromHostProgram);
    r_.weights_to_host_cycles = prog_cycles(kWeightsToHostProgram);
  }

  // Times each graph runs in one run of the main program: Repeat multiplies
  // by its trip count; an If counts its longer branch (the static estimate).
  void executions() {
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
      o.exchange_code_bytes = (c.xcode + c.hxcode + c.gxcode) * c.tiles.count;
      o.control_code_bytes = (int64_t)c.programs * (t_.cc_program + t_.cc_sync) * t_.tiles_per_ipu;
      o.plan = c.plan;
      if (!c.vtypes.empty()) o.vertex = vtype_names_[c.vtypes[0]];
    }
  }

  void finish() {
    for (int t = 0; t < T_; ++t) cat_[kNotAlwaysLive][t] = main_peak_.empty() ? 0.0 : main_peak_[t];
    r_.per_tile = std::move(cat_);
    r_.loaded_code.assign(T_, 0.0);
    for (const auto& l : loaded_)
      for (size_t t = 0; t < l.size(); ++t) r_.loaded_code[t] += l[t];
    r_.main_graph = main_;
    r_.tensors.assign(d_.tensors.size(), TensorReport{});
    for (size_t t = 0; t < d_.tensors.size(); ++t) {
      auto& tr = r_.tensors[t];
      tr.tensor = (int)t;
      if (al_.root[t] != (int)t) continue;
      const TileMap& m = map_[t];
      tr.ipu = m.ipu;
      tr.first_tile = m.set_begin + m.first;
      tr.tiles = m.count;
      tr.bytes_per_tile = m.per_tile;
      tr.always_live = always_live((int)t);
    }
  }

  const ProgramDesc& d_;
  int main_;
  const Options& o_;
  Report& r_;
  Target t_;
  int T_ = 1;
  std::vector<int> order_;
  Aliasing al_;
  Lowered low_;
  std::vector<int> rotate_;
  std::vector<TileMap> map_;
  std::vector<char> mapped_;
  std::vector<OpCost> cost_;
  std::vector<TileMap> pad_map_;     // per remote buffer: its landing pad's layout
  std::vector<char> pad_mapped_;
  std::unordered_map<std::string, Plan> plans_;
  std::unordered_map<std::string, int> vtype_id_;
  std::vector<std::string> vtype_names_;
  std::vector<int64_t> vtype_code_;
  std::vector<std::vector<char>> vcover_;
  std::vector<int64_t> inst_;
  std::vector<char> needed_;
  std::vector<int64_t> if_inst_;
  std::vector<std::vector<double>> loaded_;
  std::vector<std::vector<double>> cat_;
  std::vector<std::vector<float>> peak_;
  std::vector<double> main_peak_;
  std::vector<int64_t> gcycles_;
  std::unordered_map<int, int64_t> opcyc_;
  std::unordered_map<int, std::set<int>> bind_src_;  // callee root -> caller roots bound to it
  std::set<int> out_roots_;
};

}  // namespace

Report analyse(const ProgramDesc& desc, int main, const Options& opts) {
  Report r;
  Model m(desc, main, opts, r);
  m.run();
  return r;
}

}  // namespace model
}  // namespace ipuxl
