// Shared state of the IPU model's passes (cpp/model/*.cpp), internal to
// cpp/model: the program, its lowering and aliasing, the target, each
// tensor's tile mapping, each op's cost, each graph's code instances and
// peaks. Model::run() runs the passes in order: mapping and costs
// (mapping.cpp, costs.cpp, amp.cpp), code (code.cpp), liveness and cycles
// (liveness.cpp), then executions and the report (model.cpp).
#pragma once

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "matmul_plan.hpp"
#include "model.hpp"

namespace ipuxl {
namespace model {

inline bool is_site(OpKind k) { return k == OpKind::Call || k == OpKind::Repeat || k == OpKind::If; }

inline int64_t ceil_div(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }

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
  // Operands the op first copies into its plan's layout (poplin's
  // rearrangement of a matmul's / convolution's input and weights) and
  // the bytes per tile of those copies: the copy is a program before the
  // op's compute sets, so an operand whose last use is this op is dead
  // once it has been copied (liveness.cpp).
  std::vector<int> rearranged;
  int64_t rearranged_t = 0;
  // Of those copies, the bytes per tile the compute sets' temporaries do
  // not already hold (the weights' copy when the columns run in serial
  // steps, each step exchanging only its piece): live beside `temp`.
  int64_t rearranged_hold_t = 0;
  int code_load_graph = -1;   // RemoteCodeLoad: the graph whose code it loads
  std::string plan;
  int64_t cycles() const { return compute + exchange; }
};

// A step of a graph's body for liveness and cycles.
struct StepRec {
  ProgramStep kind = ProgramStep::Execute;
  int op = -1;
  int copy_src = -1, copy_dst = -1;
  std::vector<int> touched;       // tensors (any graph)
  std::vector<int> inner;         // graphs whose peaks this step holds (If: the max of them)
  TileMap temp;                   // temporaries (per_tile/last as bytes)
  int64_t cycles = 0;
  int64_t own = 0;                // cycles of the op itself (a call site: without callee bodies)
  int load_graph = -1;            // RemoteCodeLoad: loaded code becomes live here
  std::vector<int> calls;         // graphs this step calls (ends loaded-code liveness)
  std::vector<int> held;          // caller tensors the callee's peak counts (held_out_)
  int xgroup = -1;                // exchange group (MultiExchange) of its op
  bool io = false;                // runs on the IO tiles, beside compute
  bool phase = false;             // the rearrangement before an op's compute (not a report step)
};

// Exchanging `bytes_per_tile` onto `dst` tiles from `src`: cycles and
// code. Reading a tensor held on another IPU is a global exchange over
// the IPU-Links.
struct Xch {
  int64_t cycles = 0;
  int64_t code = 0;     // per destination tile
  bool global = false;
};

struct EwShape {
  int64_t header, per_vector, unroll;
};

struct CopyCost {
  int64_t compute = 0, exchange = 0, code = 0;
  bool on_tile = false, global = false;
};

// ------------------------------------------------------------------ matmul

// -------------------------------------------------------------- code walk
struct Acc {
  std::vector<std::vector<double>>* cat;
  std::vector<double>* loaded;  // code-loaded graph: its control/exchange code
  double w;
  int64_t* sum;                 // code bytes of one instance, all tiles
};

class Model {
 public:
  Model(const ProgramDesc& d, int main, const Options& o, Report& r)
      : d_(d), main_(main), o_(o), r_(r) {}

  void run();

 private:
  // Each section is one file. Passes (in run()'s order): setup_target,
  // collect_binds, map_and_cost, code_instances, code_walk,
  // liveness_and_cycles, executions, finish; the rest are their helpers.
  // ---- setup, elided copies, executions, the report (model.cpp)
  // The lowering binds a call site's tensors in place of the callee's
  // parameters (a host simulator rebinds pointers per call). On the IPU a
  // Function works on fixed tensors, so PopART's AliasZeroCopy can only
  // alias a parameter with a caller tensor that is the same at every call
  // site; elsewhere the copy is made (§1.3 CallOpx: CopyInput/CopyOutput
  // unless aliased).
  void collect_binds_in(const Node& n);
  void collect_binds();
  // The copies a Bind node stands for on the IPU: (src, dst) pairs.
  std::vector<std::pair<int, int>> bound_copies(const Node& n) const;
  void setup_target();
  // Times each graph runs in one run of the main program: Repeat multiplies
  // by its trip count; an If counts its longer branch (the static estimate).
  void executions();
  void finish();

  // ---- tile mapping, exchanges and copies (mapping.cpp)
  TileMap tile_set(const Placement& p) const;
  int& rotation(const TileMap& set);
  // poputil::calcLinearTileMapping: a grain of one 64-bit vector, at least
  // 128 bytes per tile, as few tiles as that allows up to the whole set;
  // the start rotates across tensors like PopART's LinearMapper (§5.4).
  TileMap linear(int64_t nelms, DType dt, const Placement& p);
  // `bytes` spread evenly (in elements of `es` bytes) over `tiles` tiles of
  // `where`'s set from its first tile.
  static TileMap spread(const TileMap& where, int64_t tiles, int64_t nelms, int64_t es);
  // A range of `count` tiles for an op's own plan, from the set's first tile (poplin).
  TileMap op_range(const Placement& p, int64_t count);
  // m with the bytes of a tensor of `es` bytes per element instead of `from_es`.
  static TileMap rescale(TileMap m, int64_t from_es, int64_t es);
  // Adds `each` bytes (times w) to every tile of m's range.
  void add_each(std::vector<double>& v, const TileMap& m, double each) const;
  void add_map(std::vector<double>& v, const TileMap& m, double w) const;
  void add_ipu(std::vector<double>& v, int ipu, double each) const;
  int vtype(const std::string& name, int64_t code_bytes);
  void set_map(int t, const TileMap& m);
  void ensure_linear(int t);
  Xch exchange_in(const TileMap& src, int dst_ipu, int64_t bytes_per_tile, int64_t total_bytes, int share = 1) const;
  void map_and_cost();
  // Inputs that must be exchanged to the op's tiles: their bytes per tile.
  void inputs_exchange(const OpRecord& op, OpCost& c, const TileMap& out, int64_t out_nelms);
  // The output's layout: aliased (in place) outputs keep their input's;
  // others follow the first input of the same size (poplibs clones the
  // input layout for elementwise outputs), else a linear mapping.
  TileMap output_like_input(const OpRecord& op, int out);
  void ensure_linear_at(int t, const Placement& p);
  int64_t stream_cycles(int64_t bytes, double bytes_per_second) const;
  // A Copy program: an on-tile copy when both tensors have the same tiles,
  // else an exchange (4 B/cycle per tile), or a global exchange between IPUs.
  CopyCost copy_cost(const TileMap& src, const TileMap& dst, int64_t bytes) const;
  template <class F>
  void for_tiles(const TileMap& m, F f) const {
    const int base = m.ipu * t_.tiles_per_ipu + m.set_begin;
    for (int i = 0; i < m.count; ++i) f(base + (m.first + i) % m.set_size, i + 1 == m.count ? m.last : m.per_tile);
  }
  bool mapped(int t) const { return mapped_[al_.root[t]]; }
  const TileMap& mapping(int t) const { return map_[al_.root[t]]; }

  // ---- the cost of each op by its cost class (costs.cpp)
  // poplibs elementwise estimators (§3.1, popops PerformanceEstimation):
  // a supervisor vertex runs 6 workers, each ceil(n/6) elements, in
  // vectors of w (64 bits); the tile interleaves the workers, so tile
  // cycles are 6 x worker cycles plus the supervisor overhead.
  int64_t ew_cycles(int64_t n, int64_t es, int64_t header, int64_t per_vector, int64_t unroll) const;
  // An elementwise op's figures: its OpDef's cost parameters, else §3.1's defaults.
  EwShape ew_shape(const OpRecord& op, int n_in, bool half) const;
  void cost_op(int op_id, const OpRecord& op);
  void cost_view(const OpRecord& op, OpCost& c);
  // A view of several tensors (concat_ of more than one input): no storage
  // and no program of its own; its uses keep its parts live, and its
  // layout (for its consumers) is the parts' tiles.
  void cost_multi_view(const OpRecord& op, OpCost& c);
  // The layout of the concatenation of tensors `ts` (each mapped): the
  // tiles from the first part's first over as many tiles as the parts
  // cover (contiguous when each part starts where the previous ended).
  TileMap joined_map(const std::vector<int>& ts, int64_t nelms, int64_t es);
  // The layout of `out_nelms` elements taken from a tensor mapped as `m`
  // holding `in_nelms` (a slice stays on the tiles that hold it).
  static TileMap part_map(const TileMap& m, int64_t in_nelms, int64_t out_nelms, int64_t in_es,
                          int64_t out_es);
  void cost_elementwise(const OpRecord& op, OpCost& c, bool random);
  // popops::reduce: each input tile reduces its part into fp32 partials,
  // the partials are exchanged to the output's tiles and reduced again
  // (two compute sets and an exchange). TopK/ArgMax/CumSum are costed alike.
  void cost_reduce(const OpRecord& op, OpCost& c);
  // Softmax (popnn) and the losses built on it: a max and a sum reduction
  // along rows and two elementwise passes (sub+exp, divide).
  void cost_softmax(const OpRecord& op, OpCost& c);
  // popops::multiSlice / dynamicSlice: the output, mapped linearly, pulls
  // its rows from wherever the table lives.
  void cost_gather(const OpRecord& op, OpCost& c);
  // popops::multiUpdate / dynamicUpdate: updates exchanged to the tiles of
  // the updated tensor, then written in place.
  void cost_scatter(const OpRecord& op, OpCost& c);
  // Data movement as PopART's cloneNcopy (costs.cpp): with `keeps` the
  // output clones the input's tiles (a slice: the tiles holding it, a
  // concatenation: its parts') and the copy is on tile; otherwise a new
  // linear layout, exchanged.
  void cost_copy_op(const OpRecord& op, OpCost& c, bool keeps);
  // Sources without a producer in their graph (a host_load's or a
  // remote_load's output) are laid out by their first consumer (PopART
  // creates them with the layout the consumer asks for: CanCreate /
  // unwinding); their own ops are costed once their graph is mapped.
  bool defer_source(int op_id, const OpRecord& op);
  void finish_deferred();
  // popnn pooling: each output element reads its window on the tiles of
  // the input; gradients scatter back over the same windows.
  void cost_pool(const OpRecord& op, OpCost& c);
  // popnn normalisations: per-group statistics (two reductions, exchanged
  // and broadcast back like softmax's row statistics), then whitening,
  // scale and shift (elementwise passes).
  void cost_norm(const OpRecord& op, OpCost& c);
  // An all-reduce of tensors held on several IPUs (ops.all_reduce): a ring
  // over the IPU-Links like a replicated all-reduce of the same bytes.
  void cost_ipu_all_reduce(const OpRecord& op, OpCost& c);
  void cost_fill(const OpRecord& op, OpCost& c);
  void cost_print(const OpRecord& op, OpCost& c);
  void cost_code_load(const OpRecord& op, OpCost& c);
  // RemoteLoad = Copy(buffer entry -> landing pad), Copy(pad -> out);
  // RemoteStore = Copy(in -> pad), Copy(pad -> buffer entry) (§1.6): a
  // global sync, the bytes at the streaming bandwidth, an on-tile pad copy.
  // The first user's layout is the pad's (§1.6: a clone of it).
  void cost_remote(const OpRecord& op, OpCost& c);
  // A collective across the replicas of each group (§5: GCL rings over
  // the IPU-Links), with G replicas in a group and B bytes: all-reduce
  // 2(G-1)/G * B / bw_link + 2(G-1) global syncs; reduce-scatter and
  // all-gather (G-1)/G * B / bw_link + (G-1) syncs (B the unsharded size:
  // the input of a reduce-scatter, the output of an all-gather). A
  // reduction also adds each received slice on tile; one replica alone
  // (G = 1) exchanges nothing.
  void cost_collective(const OpRecord& op, OpCost& c);

  // ---- matmul and convolution plans on the AMP unit (amp.cpp)
  // Values v in [1, x] giving distinct ceil(x / v), thinned to at most `keep`.
  static std::vector<int64_t> splits(int64_t x, int64_t cap, size_t keep = 40);
  // A poplin-like plan: the output's rows (M), columns (N, in groups of the
  // AMP's output channels) and the contraction (K, in groups of its input
  // channels) split over tiles; the plan with the fewest estimated cycles
  // whose temporaries fit the available memory proportion of a tile wins
  // (poplin's planner minimises cycles under a memory constraint).
  // a_reuse / b_reuse: how many times the piece of A / B a tile needs
  // repeats in its matmul form (a convolution's taps: 1 for a matmul).
  // half_partials: poplin's partialsType "half" (2-byte partial sums, the
  // fp16-in/fp16-out conv units); float inputs always use float partials.
  Plan plan_matmul(int64_t G, bool grouped, int64_t M, int64_t K, int64_t N, DType dt,
                   int64_t tiles, bool a_resident, bool b_resident, double amp, int64_t a_reuse,
                   int64_t b_reuse, bool half_partials);
  // The operand bytes each tile of plan p receives (p.a_t, p.b_t) and the
  // exchange bringing them (p.exch_in): an operand held in the plan's
  // layout (a_held / b_held) has each tile's share of its piece there
  // already, so only the rest is exchanged in; any other is received whole.
  void place_operands(Plan& p, bool a_held, bool b_held) const;
  void cost_matmul(const OpRecord& op, OpCost& c);
  // A matmul-shaped problem on the AMP unit: plan, creator layouts of the
  // operands not yet laid out, cycles, code; shared by matmul and conv.
  void cost_amp(const OpRecord& op, OpCost& c, int a, int b, int64_t G, bool grouped, int64_t M,
                int64_t K, int64_t N, const std::string& vertex, int64_t a_reuse, int64_t b_reuse);
  // Convolutions (poplin) as the matmul poplin's planner lowers them to:
  // forward [N·out positions, Cin/g·kernel] x [Cin/g·kernel, Cout/g] per
  // group; the data gradient the same with in and out channels swapped;
  // the weights gradient [Cout/g, N·out positions] x [N·out positions,
  // Cin/g·kernel]. FLOPs 2·N·Cout·out positions·Cin/g·kernel.
  void cost_conv(const OpRecord& op, OpCost& c);

  // ---- code instances and code size (code.cpp)
  // How many copies of each graph's code the program holds: a graph called
  // by Call/Repeat is one Function (1); each If site inlines its branch
  // graphs (IfOpx::callBranch adds the branch's sequences in place, §1.3).
  void code_instances();
  void code_add(Acc& a, int category, const TileMap& m, int64_t each);
  void control_add(Acc& a, int ipu, int64_t each);
  void mark_vertices(const OpCost& c);
  void copy_code(Acc& a, int src, int dst, int ipu);
  // Exchange programs with the same pattern share their code (Poplar
  // reuses identical copies' code): the key of an op's exchanges and of a
  // Copy; exchange_seen() records a key and says whether it was known.
  bool exchange_seen(const std::string& key);
  std::string op_exchange_key(int op_id) const;
  std::string copy_exchange_key(int src, int dst) const;
  void walk_code(const Node& n, Acc& a, int site_ipu);
  const Node& body_of(int g) const;
  void code_walk();
  // Remote buffers take no tile memory but their landing pads: one per
  // buffer, two when a MultiExchange both loads and stores it (§1.6,
  // remoteBufferSeparateLoadStorePadsRequired). Pads are always live.
  void remote_buffers();

  // ---- liveness and cycles over program steps (liveness.cpp)
  bool always_live(int t) const;
  int64_t copy_cycles(int src, int dst) const;
  int64_t seq_cycles(const Node& n, bool callees = true) const;
  bool on_io_tiles(const OpRecord& op) const;
  // The members of one MultiExchange are consecutive steps: one exchange,
  // so only the first pays the sync.
  void merged_sync(StepRec& s, const OpRecord& op, const std::vector<StepRec>& out) const;
  // Leaf steps of a graph body, in program order; a call site's copies are
  // steps of their own, its Call one step holding the callee's peak.
  void flatten(const Node& n, std::vector<StepRec>& out, int site_op);
  // The storage roots a tensor stands for: its root, or the parts of a
  // multi-input view (recursively).
  void storage_roots(int t, std::vector<int>& out) const;
  // A callee parameter or output whose every call site binds the same
  // caller tensor (AliasZeroCopy): it is that tensor's storage, counted
  // by the caller at the call step, not again inside the callee.
  bool shares_caller_storage(int root) const;
  void liveness_and_cycles();
  void find_tail_owned();

  // ---- state
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
  std::set<std::string> xseen_;      // exchange patterns whose code exists
  std::vector<char> xshared_;        // per op: its internal exchange code is another's
  // Code of each call site (Call, Repeat, If op) of one instance of its
  // graph: its copies and control programs, not the callee's body.
  struct SiteCode {
    int64_t state = 0, xcode = 0, ccode = 0;
  };
  std::vector<SiteCode> site_;
  int site_op_ = -1;
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
  std::set<int> copied_roots_;                       // callee roots a Copy node reads or writes
  std::vector<std::vector<int>> view_parts_;         // multi-input view root -> its parts
  std::vector<int> deferred_;                        // source ops costed after their graph
  std::vector<std::vector<PeakEntry>> peak_list_;    // per graph: live at its peak step
  std::vector<int> site_bound_;                      // flatten: caller tensors bound at this site
  std::set<int> held_out_;        // callee output roots aliased with their caller's (counted by the callee)
  std::vector<int> site_held_;    // flatten: caller tensors bound to held_out_ roots at this site
  std::set<int> tail_owned_;      // callee input roots aliased with a caller tensor that dies at the call
};

}  // namespace model
}  // namespace ipuxl
