#include "engine.hpp"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <set>
#include <sstream>

namespace ipuxl {

// ---------------------------------------------------------------- ProgramDesc

void ProgramDesc::check_graph(int g, const char* what) const {
  if (g < 0 || g >= (int)graphs.size())
    throw Error(std::string(what) + ": no graph with index " + std::to_string(g));
}
void ProgramDesc::check_tensor(int t, const char* what) const {
  if (t < 0 || t >= (int)tensors.size())
    throw Error(std::string(what) + ": no tensor with index " + std::to_string(t));
}

int ProgramDesc::add_graph(const std::string& name) {
  graphs.push_back(GraphDesc{name, {}, {}, {}});
  return (int)graphs.size() - 1;
}

int ProgramDesc::add_tensor(int graph, const std::string& name, DType dtype, const Shape& shape,
                            TensorKind kind) {
  check_graph(graph, "add_tensor");
  for (auto d : shape)
    if (d < 0) throw Error("tensor '" + name + "' has a negative dimension " + shape_str(shape));
  TensorDesc t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  t.kind = kind;
  t.graph = graph;
  tensors.push_back(std::move(t));
  return (int)tensors.size() - 1;
}

void ProgramDesc::set_tensor_data(int tensor, const uint8_t* data, size_t nbytes) {
  check_tensor(tensor, "set_tensor_data");
  auto& t = tensors[tensor];
  size_t want = (size_t)shape_nelms(t.shape) * dtype_size(t.dtype);
  if (nbytes != want)
    throw Error("tensor '" + t.name + "': data has " + std::to_string(nbytes) +
                " bytes, expected " + std::to_string(want));
  t.data.assign(data, data + nbytes);
}

int ProgramDesc::add_op(OpRecord op) {
  check_graph(op.graph, "add_op");
  for (int t : op.in)
    if (t != -1) check_tensor(t, op.name.c_str());
  for (int t : op.out) check_tensor(t, op.name.c_str());
  for (int g : op.graphs) check_graph(g, op.name.c_str());
  for (auto& a : op.aliases)
    if (a.first < 0 || a.first >= (int)op.out.size() || a.second < 0 ||
        a.second >= (int)op.in.size() || op.in[a.second] < 0)
      throw Error("op '" + op.name + "': invalid alias pair");
  op.attrs.op_name = op.name;
  ops.push_back(std::move(op));
  int id = (int)ops.size() - 1;
  graphs[ops.back().graph].ops.push_back(id);
  return id;
}

int ProgramDesc::add_stream(const std::string& name, DType dtype, const Shape& shape, bool h2d) {
  streams.push_back(StreamDesc{name, dtype, shape, h2d});
  return (int)streams.size() - 1;
}

void ProgramDesc::set_graph_io(int graph, std::vector<int> inputs, std::vector<int> outputs) {
  check_graph(graph, "set_graph_io");
  for (int t : inputs) check_tensor(t, "graph input");
  for (int t : outputs) check_tensor(t, "graph output");
  graphs[graph].inputs = std::move(inputs);
  graphs[graph].outputs = std::move(outputs);
}

// ---------------------------------------------------------------- programs

namespace {

void pad(std::ostream& os, int n) { os << std::string((size_t)n * 2, ' '); }

struct Sequence : Prog {
  std::vector<std::unique_ptr<Prog>> body;
  void run(Exec& ex) override {
    for (auto& p : body) p->run(ex);
  }
  void describe(std::ostream& os, int indent) const override {
    pad(os, indent);
    os << "Sequence\n";
    for (auto& p : body) p->describe(os, indent + 1);
  }
  void count(std::map<std::string, int64_t>& c) const override {
    c["Sequence"]++;
    for (auto& p : body) p->count(c);
  }
};

struct Execute : Prog {
  std::unique_ptr<Kernel> kernel;
  std::string label;
  ExecProfile* prof = nullptr;
  void run(Exec& ex) override {
    if (!ex.profiling) {
      kernel->run(ex.ctx);
      return;
    }
    auto t0 = std::chrono::steady_clock::now();
    kernel->run(ex.ctx);
    prof->seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    prof->calls++;
  }
  void describe(std::ostream& os, int indent) const override {
    pad(os, indent);
    os << "Execute(" << label << ")\n";
  }
  void count(std::map<std::string, int64_t>& c) const override { c["Execute"]++; }
};

// Copies read the tensors' storage pointers when they run: call sites may
// rebind a called graph's inputs and outputs to the caller's buffers.
struct Copy : Prog {
  const TensorRef* src;
  const TensorRef* dst;
  size_t bytes;
  std::string label;
  void run(Exec&) override {
    if (bytes && src->data != dst->data) std::memcpy(dst->data, src->data, bytes);
  }
  void describe(std::ostream& os, int indent) const override {
    pad(os, indent);
    os << "Copy(" << label << ")\n";
  }
  void count(std::map<std::string, int64_t>& c) const override { c["Copy"]++; }
};

// Points the storage of a called graph's inputs/outputs (and every tensor
// aliasing them) at the caller's tensors, or back at their own buffers.
// Reading a caller tensor in place replaces a copy in and writing a caller
// tensor in place replaces a copy out.
struct Bind : Prog {
  struct Item {
    std::vector<TensorRef*> group;  // the called graph's tensors sharing one storage
    const TensorRef* to = nullptr;  // caller tensor, or nullptr for the home buffer
    uint8_t* home = nullptr;
  };
  std::vector<Item> items;
  int64_t rebound = 0;
  void run(Exec&) override {
    for (auto& it : items) {
      uint8_t* p = it.to ? it.to->data : it.home;
      for (auto* r : it.group) r->data = p;
    }
  }
  void describe(std::ostream& os, int indent) const override {
    if (!rebound) return;
    pad(os, indent);
    os << "Bind(" << rebound << " caller tensors used in place)\n";
  }
  void count(std::map<std::string, int64_t>& c) const override { c["ElidedCopy"] += rebound; }
};

struct CallFn : Prog {
  Function* fn;
  void run(Exec& ex) override { fn->body->run(ex); }
  void describe(std::ostream& os, int indent) const override {
    pad(os, indent);
    os << "Call(" << fn->name << ")\n";
  }
  void count(std::map<std::string, int64_t>& c) const override { c["Call"]++; }
};

struct Repeat : Prog {
  int64_t n;
  std::unique_ptr<Prog> body;
  void run(Exec& ex) override {
    for (int64_t i = 0; i < n; ++i) body->run(ex);
  }
  void describe(std::ostream& os, int indent) const override {
    pad(os, indent);
    os << "Repeat(" << n << ")\n";
    body->describe(os, indent + 1);
  }
  void count(std::map<std::string, int64_t>& c) const override {
    c["Repeat"]++;
    body->count(c);
  }
};

struct If : Prog {
  const TensorRef* cond;
  std::unique_ptr<Prog> then_p, else_p;
  void run(Exec& ex) override {
    bool c = false;
    const uint8_t* p = cond->data;
    for (size_t i = 0; i < dtype_size(cond->dtype); ++i) c = c || p[i] != 0;
    // Floating point -0.0 has a sign bit only: treat it as false.
    if (cond->dtype == DType::Float32) c = *cond->as<float>() != 0.0f;
    if (cond->dtype == DType::Float16) c = (float)*cond->as<f16>() != 0.0f;
    if (cond->dtype == DType::Float64) c = *cond->as<double>() != 0.0;
    (c ? then_p : else_p)->run(ex);
  }
  void describe(std::ostream& os, int indent) const override {
    pad(os, indent);
    os << "If(" << cond->name << ")\n";
    then_p->describe(os, indent + 1);
    pad(os, indent);
    os << "Else\n";
    else_p->describe(os, indent + 1);
  }
  void count(std::map<std::string, int64_t>& c) const override {
    c["If"]++;
    then_p->count(c);
    else_p->count(c);
  }
};

struct StreamToTensor : Prog {
  int stream;
  TensorRef* dst;
  std::string stream_name;
  void run(Exec& ex) override {
    auto& b = ex.streams[stream];
    if (b.data == nullptr || b.cursor >= b.items)
      throw RunError("[StepIOSplitter] IStepIO unexpectedly did not provide input data for "
                     "stream '" + stream_name + "': it holds " + std::to_string(b.items) +
                     " transfer(s) and all were consumed in this run (num_host_transfers "
                     "limits host_load executions per stream per run)");
    std::memcpy(dst->data, b.data + b.cursor * b.item_bytes, b.item_bytes);
    b.cursor++;
  }
  void describe(std::ostream& os, int indent) const override {
    pad(os, indent);
    os << "StreamCopy(host -> " << dst->name << ", " << stream_name << ")\n";
  }
  void count(std::map<std::string, int64_t>& c) const override { c["StreamCopy"]++; }
};

struct TensorToStream : Prog {
  int stream;
  const TensorRef* src;
  std::string stream_name;
  void run(Exec& ex) override {
    auto& b = ex.streams[stream];
    if (b.data == nullptr || b.cursor >= b.items)
      throw RunError("host_store to stream '" + stream_name + "': no space left in the " +
                     std::to_string(b.items) +
                     " transfer(s) of the output buffer (num_host_transfers limits "
                     "host_store executions per stream per run)");
    std::memcpy(b.data + b.cursor * b.item_bytes, src->data, b.item_bytes);
    b.cursor++;
  }
  void describe(std::ostream& os, int indent) const override {
    pad(os, indent);
    os << "StreamCopy(" << src->name << " -> host, " << stream_name << ")\n";
  }
  void count(std::map<std::string, int64_t>& c) const override { c["StreamCopy"]++; }
};

// Zeroed, 64-byte aligned storage. calloc hands large blocks straight from
// fresh (lazily zeroed) pages, so buffers that are never touched -- a called
// graph's own input buffers when every call site binds the caller's tensors
// -- cost address space but no memory.
struct ArenaBlock {
  void* base = nullptr;
  uint8_t* data = nullptr;
};
ArenaBlock zeroed_alloc64(size_t n) {
  ArenaBlock b;
  b.base = std::calloc(n + 64, 1);
  if (!b.base) throw Error("out of host memory allocating " + std::to_string(n) + " bytes");
  uintptr_t p = (reinterpret_cast<uintptr_t>(b.base) + 63) & ~uintptr_t(63);
  b.data = reinterpret_cast<uint8_t*>(p);
  return b;
}

}  // namespace

// ---------------------------------------------------------------- Engine

Engine::Engine(std::shared_ptr<const ProgramDesc> desc, int main_graph)
    : desc_(std::move(desc)), main_graph_(main_graph) {
  desc_->check_graph(main_graph_, "Engine");
  allocate();
  for (size_t g = 0; g < desc_->graphs.size(); ++g) {
    const auto& w = written_roots((int)g);
    program_written_.insert(w.begin(), w.end());
  }
  main_ = lower_graph_body(main_graph_);
}

void Engine::allocate() {
  const auto& ts = desc_->tensors;
  refs_.resize(ts.size());
  root_.resize(ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    root_[i] = (int)i;
    refs_[i].dtype = ts[i].dtype;
    refs_[i].shape = ts[i].shape;
    refs_[i].nelms = shape_nelms(ts[i].shape);
    refs_[i].name = ts[i].name;
  }
  // Outputs that alias an input share its storage (in-place and view ops).
  // Ops are recorded in creation order, so an input's root is already final.
  for (const auto& op : desc_->ops) {
    for (auto [o, i] : op.aliases) {
      int src = op.in[i], dst = op.out[o];
      if (refs_[dst].nbytes() != refs_[src].nbytes())
        throw Error("op '" + op.name + "': output '" + refs_[dst].name + "' aliases input '" +
                    refs_[src].name + "' but their sizes differ");
      root_[dst] = root_[src];
    }
  }
  std::vector<size_t> offset(ts.size(), 0);
  size_t total = plan_memory(offset);
  arena_bytes_ = total;
  ArenaBlock block = zeroed_alloc64(total);
  arena_base_ = std::unique_ptr<void, void (*)(void*)>(block.base, [](void* p) { std::free(p); });
  arena_ = std::unique_ptr<uint8_t[], void (*)(uint8_t*)>(block.data, [](uint8_t*) {});
  for (size_t i = 0; i < ts.size(); ++i) refs_[i].data = arena_.get() + offset[root_[i]];
  for (size_t i = 0; i < ts.size(); ++i)
    if (!ts[i].data.empty()) std::memcpy(refs_[i].data, ts[i].data.data(), ts[i].data.size());
  members_.assign(ts.size(), {});
  home_.assign(ts.size(), nullptr);
  for (size_t i = 0; i < ts.size(); ++i) {
    members_[root_[i]].push_back((int)i);
    home_[root_[i]] = refs_[root_[i]].data;
  }
}

namespace {
size_t round64(size_t n) { return ((n + 63) / 64) * 64; }
}  // namespace

size_t Engine::plan_memory(std::vector<size_t>& offset) {
  const auto& ts = desc_->tensors;
  const size_t n = ts.size();
  // Pinned roots keep their bytes for the whole program: variables,
  // constants, graph inputs and outputs (a repeated body reads its inputs in
  // every iteration; outputs are copied out after the body), and anything
  // aliased with them.
  std::vector<char> pinned(n, 0);
  for (size_t i = 0; i < n; ++i)
    if (ts[i].kind != TensorKind::Intermediate) pinned[root_[i]] = 1;
  for (const auto& g : desc_->graphs) {
    for (int t : g.inputs) pinned[root_[t]] = 1;
    for (int t : g.outputs) pinned[root_[t]] = 1;
  }
  // Live range of each root: [first op that defines or uses any of its
  // aliases, last op that does], positions within its graph's schedule.
  std::vector<int64_t> first(n, INT64_MAX), last(n, -1);
  std::vector<int> graph_of(n, -1);
  for (size_t g = 0; g < desc_->graphs.size(); ++g) {
    const auto& ops = desc_->graphs[g].ops;
    for (size_t pos = 0; pos < ops.size(); ++pos) {
      const auto& op = desc_->ops[ops[pos]];
      auto touch = [&](int t) {
        if (t < 0) return;
        int r = root_[t];
        first[r] = std::min<int64_t>(first[r], (int64_t)pos);
        last[r] = std::max<int64_t>(last[r], (int64_t)pos);
        graph_of[r] = (int)g;
      };
      for (int t : op.in) touch(t);
      for (int t : op.out) touch(t);
    }
  }
  size_t total = 0;
  unplanned_bytes_ = 0;
  std::vector<std::vector<int>> per_graph(desc_->graphs.size());
  for (size_t i = 0; i < n; ++i) {
    if (root_[i] != (int)i) continue;
    size_t bytes = round64(refs_[i].nbytes());
    unplanned_bytes_ += bytes;
    if (pinned[i] || graph_of[i] < 0) {  // pinned, or never touched by an op
      offset[i] = total;
      total += bytes;
    } else {
      per_graph[graph_of[i]].push_back((int)i);
    }
  }
  // Per graph: greedy placement, largest first, at the lowest offset that
  // does not collide with a placed tensor whose live range overlaps.
  for (auto& roots : per_graph) {
    std::sort(roots.begin(), roots.end(), [&](int a, int b) {
      size_t sa = refs_[a].nbytes(), sb = refs_[b].nbytes();
      return sa != sb ? sa > sb : a < b;
    });
    struct Placed { size_t off, end; int64_t first, last; };
    std::vector<Placed> placed;
    size_t region = 0;
    for (int r : roots) {
      size_t bytes = round64(refs_[r].nbytes());
      std::vector<std::pair<size_t, size_t>> busy;
      for (const auto& p : placed)
        if (p.first <= last[r] && first[r] <= p.last) busy.push_back({p.off, p.end});
      std::sort(busy.begin(), busy.end());
      size_t off = 0;
      for (const auto& b : busy) {
        if (off + bytes <= b.first) break;
        off = std::max(off, b.second);
      }
      placed.push_back({off, off + bytes, first[r], last[r]});
      offset[r] = total + off;  // total is this region's base until the loop ends
      region = std::max(region, off + bytes);
    }
    total += region;
  }
  return total;
}

std::unique_ptr<Prog> Engine::copy(int src, int dst) const {
  auto c = std::make_unique<Copy>();
  const auto& s = refs_[src];
  const auto& d = refs_[dst];
  if (s.dtype != d.dtype || s.shape != d.shape)
    throw Error("cannot copy '" + s.name + "' " + dtype_name(s.dtype) + shape_str(s.shape) +
                " into '" + d.name + "' " + dtype_name(d.dtype) + shape_str(d.shape));
  c->src = &s;
  c->dst = &d;
  c->bytes = root_[src] == root_[dst] ? 0 : s.nbytes();
  c->label = s.name + " -> " + d.name;
  return c;
}

const std::set<int>& Engine::written_roots(int graph) {
  auto it = written_.find(graph);
  if (it != written_.end()) return it->second;
  std::set<int> w;
  for (int op_id : desc_->graphs[graph].ops) {
    const auto& op = desc_->ops[op_id];
    // Python passes every op's written inputs as the "modified" attribute.
    std::vector<int64_t> mods = op.attrs.ints("modified", {});
    for (int64_t i : mods)
      if (i >= 0 && i < (int64_t)op.in.size() && op.in[i] >= 0) w.insert(root_[op.in[i]]);
    // A called graph that writes its inputs writes what the caller passes.
    for (int cg : op.graphs) {
      const auto& cw = written_roots(cg);
      const auto& cgd = desc_->graphs[cg];
      for (size_t k = 0; k < cgd.inputs.size() && k + (op.type == "If" ? 1 : 0) < op.in.size(); ++k)
        if (cw.count(root_[cgd.inputs[k]])) {
          int parent = op.in[k + (op.type == "If" ? 1 : 0)];
          if (parent >= 0) w.insert(root_[parent]);
        }
    }
  }
  return written_[graph] = std::move(w);
}

void Engine::plan_call_binding(const OpRecord& op, int graph, int64_t carried,
                               std::vector<bool>& in_place_in, std::vector<bool>& in_place_out) {
  if (!elide_copies_) return;
  const auto& g = desc_->graphs[graph];
  const auto& written = written_roots(graph);
  std::map<int, int> parent_uses;
  for (int t : op.in) parent_uses[root_[t]]++;
  std::set<int> input_roots;
  for (int t : g.inputs) input_roots.insert(root_[t]);
  for (size_t i = 0; i < op.in.size(); ++i) {
    if ((int64_t)i < carried) continue;  // loop-carried: the body writes it every iteration
    int child = g.inputs[i];
    if (root_[child] != child) continue;
    bool writes = written.count(child) != 0;
    // A written input may be the caller's tensor only when the write is
    // meant to reach the caller (marked modified) and no other input of
    // this call reads the same tensor.
    bool modified = false;
    for (int64_t m : op.attrs.ints("modified", {})) modified = modified || m == (int64_t)i;
    if (writes && !(modified && parent_uses[root_[op.in[i]]] == 1)) continue;
    in_place_in[i] = true;
  }
  if (op.type != "Call") return;
  std::set<int> bound_out_roots;
  for (size_t i = 0; i < op.out.size(); ++i) {
    int child = g.outputs[i];
    int r = root_[child];
    if (input_roots.count(r) || bound_out_roots.count(r)) continue;  // passthrough or repeated
    if (desc_->tensors[r].kind != TensorKind::Intermediate) continue;  // constants keep their data
    if (root_[op.out[i]] != op.out[i]) continue;
    bound_out_roots.insert(r);
    in_place_out[i] = true;
  }
}

std::unique_ptr<Prog> Engine::bind_call(const OpRecord& op, int graph,
                                        const std::vector<bool>& in_place_in,
                                        const std::vector<bool>& in_place_out) {
  const auto& g = desc_->graphs[graph];
  auto b = std::make_unique<Bind>();
  std::set<int> done;
  auto add = [&](int child, const TensorRef* to) {
    int r = root_[child];
    if (!done.insert(r).second) return;
    Bind::Item it;
    for (int m : members_[r]) it.group.push_back(&refs_[m]);
    it.to = to;
    it.home = home_[r];
    if (to) b->rebound++;
    b->items.push_back(std::move(it));
  };
  // Bound tensors first, so a root shared by an input and an output (never
  // bound) is restored rather than skipped.
  for (size_t i = 0; i < g.inputs.size(); ++i)
    if (i < in_place_in.size() && in_place_in[i]) add(g.inputs[i], &refs_[op.in[op.type == "If" ? i + 1 : i]]);
  for (size_t i = 0; i < g.outputs.size(); ++i)
    if (i < in_place_out.size() && in_place_out[i]) add(g.outputs[i], &refs_[op.out[i]]);
  for (int t : g.inputs) add(t, nullptr);
  for (int t : g.outputs) add(t, nullptr);
  return b;
}

Function* Engine::function_for(int graph) {
  auto it = functions_.find(graph);
  if (it != functions_.end()) {
    if (!it->second->body)
      throw Error("graph '" + desc_->graphs[graph].name + "' calls itself (recursion)");
    return it->second.get();
  }
  auto fn = std::make_unique<Function>();
  fn->graph = graph;
  fn->name = desc_->graphs[graph].name;
  Function* raw = fn.get();
  functions_[graph] = std::move(fn);
  raw->body = lower_graph_body(graph);
  return raw;
}

std::unique_ptr<Prog> Engine::lower_graph_body(int graph) {
  auto seq = std::make_unique<Sequence>();
  for (int op_id : desc_->graphs[graph].ops) {
    const auto& op = desc_->ops[op_id];
    auto p = lower_op(op);  // built (and so validated) even when not run
    if (!op.attrs.has("__dead")) seq->body.push_back(std::move(p));
  }
  return seq;
}

std::unique_ptr<Prog> Engine::lower_op(const OpRecord& op) {
  auto fail = [&](const std::string& msg) -> void {
    throw Error(op.type + " op '" + op.name + "': " + msg);
  };
  const auto& G = desc_->graphs;

  if (op.type == "Call" || op.type == "Repeat") {
    if (op.graphs.size() != 1) fail("expected exactly one called graph");
    const auto& g = G[op.graphs[0]];
    if (op.in.size() != g.inputs.size())
      fail("has " + std::to_string(op.in.size()) + " inputs but graph '" + g.name + "' has " +
           std::to_string(g.inputs.size()));
    if (op.out.size() != g.outputs.size())
      fail("has " + std::to_string(op.out.size()) + " outputs but graph '" + g.name + "' has " +
           std::to_string(g.outputs.size()));
    for (int t : op.in)
      if (t < 0) fail("all inputs of a call must be connected");
    Function* fn = function_for(op.graphs[0]);
    auto seq = std::make_unique<Sequence>();
    const bool is_call = op.type == "Call";
    const int64_t carried = is_call ? 0 : (int64_t)g.outputs.size();
    std::vector<bool> in_place_in(op.in.size(), false), in_place_out(op.out.size(), false);
    plan_call_binding(op, op.graphs[0], carried, in_place_in, in_place_out);
    seq->body.push_back(bind_call(op, op.graphs[0], in_place_in, in_place_out));
    for (size_t i = 0; i < op.in.size(); ++i)
      if (!in_place_in[i]) seq->body.push_back(copy(op.in[i], g.inputs[i]));
    auto call = std::make_unique<CallFn>();
    call->fn = fn;
    if (is_call) {
      seq->body.push_back(std::move(call));
      for (size_t i = 0; i < op.out.size(); ++i)
        if (!in_place_out[i]) seq->body.push_back(copy(g.outputs[i], op.out[i]));
    } else {
      int64_t n = op.attrs.i("repeat_count");
      if (n < 0) fail("repeat_count must be >= 0");
      if (g.outputs.size() > g.inputs.size())
        fail("the repeated graph must have at least as many inputs as outputs");
      // Body: call, then carry output i into input i. Carried values that are
      // themselves inputs of the body would be clobbered by a direct copy, so
      // those go through a staging buffer.
      auto body = std::make_unique<Sequence>();
      body->body.push_back(std::move(call));
      std::set<int> input_roots;
      for (int t : g.inputs) input_roots.insert(root_[t]);
      std::vector<std::pair<int, int>> direct, staged;
      for (size_t i = 0; i < g.outputs.size(); ++i) {
        int o = g.outputs[i], in = g.inputs[i];
        if (root_[o] == root_[in]) continue;
        (input_roots.count(root_[o]) ? staged : direct).push_back({o, in});
      }
      // All carried values are read before any is written: staged sources
      // (outputs that are body inputs) go through buffers, since a direct
      // copy may overwrite them.
      struct Carry : Prog {
        std::vector<std::vector<uint8_t>> bufs;
        std::vector<std::pair<const TensorRef*, const TensorRef*>> staged, direct;
        void run(Exec&) override {
          for (size_t k = 0; k < staged.size(); ++k)
            std::memcpy(bufs[k].data(), staged[k].first->data, staged[k].first->nbytes());
          for (auto& [src, dst] : direct) std::memcpy(dst->data, src->data, src->nbytes());
          for (size_t k = 0; k < staged.size(); ++k)
            std::memcpy(staged[k].second->data, bufs[k].data(), staged[k].second->nbytes());
        }
        void describe(std::ostream& os, int indent) const override {
          pad(os, indent);
          os << "Copy(loop carry: " << direct.size() << " direct, " << staged.size()
             << " staged)\n";
        }
        void count(std::map<std::string, int64_t>& c) const override {
          c["Copy"] += (int64_t)(direct.size() + 2 * staged.size());
        }
      };
      auto carry = std::make_unique<Carry>();
      for (auto& pairs : {std::cref(direct), std::cref(staged)})
        for (auto [o, in] : pairs.get())
          if (refs_[o].shape != refs_[in].shape || refs_[o].dtype != refs_[in].dtype)
            fail("loop-carried output '" + refs_[o].name + "' does not match input '" +
                 refs_[in].name + "'");
      for (auto [o, in] : direct) carry->direct.push_back({&refs_[o], &refs_[in]});
      for (auto [o, in] : staged) {
        carry->bufs.emplace_back(refs_[o].nbytes());
        carry->staged.push_back({&refs_[o], &refs_[in]});
      }
      if (!direct.empty() || !staged.empty()) body->body.push_back(std::move(carry));
      auto rep = std::make_unique<Repeat>();
      rep->n = n;
      rep->body = std::move(body);
      seq->body.push_back(std::move(rep));
      // After the loop the carried values live in the body's inputs.
      for (size_t i = 0; i < op.out.size(); ++i)
        seq->body.push_back(copy(g.inputs[i], op.out[i]));
    }
    for (int64_t idx : op.attrs.ints("modified", {})) {
      if (idx < 0 || idx >= (int64_t)op.in.size()) fail("modified input index out of range");
      // An input bound in place was written in the caller's storage already.
      if (!in_place_in[(size_t)idx]) seq->body.push_back(copy(g.inputs[idx], op.in[idx]));
    }
    return seq;
  }

  if (op.type == "If") {
    if (op.graphs.size() != 2) fail("expected a then and an else graph");
    if (op.in.empty() || op.in[0] < 0) fail("missing condition input");
    auto then_in = op.attrs.ints("then_inputs");
    auto else_in = op.attrs.ints("else_inputs");
    auto branch = [&](int gid, const std::vector<int64_t>& in_idx) {
      const auto& g = G[gid];
      if (in_idx.size() != g.inputs.size())
        fail("branch graph '" + g.name + "' has " + std::to_string(g.inputs.size()) +
             " inputs but " + std::to_string(in_idx.size()) + " were connected");
      if (g.outputs.size() != op.out.size())
        fail("branch graph '" + g.name + "' has " + std::to_string(g.outputs.size()) +
             " outputs, expected " + std::to_string(op.out.size()));
      auto seq = std::make_unique<Sequence>();
      seq->body.push_back(bind_call(op, gid, std::vector<bool>(g.inputs.size(), false),
                                    std::vector<bool>(g.outputs.size(), false)));
      for (size_t i = 0; i < in_idx.size(); ++i) {
        int64_t k = in_idx[i];
        if (k < 1 || k >= (int64_t)op.in.size() || op.in[k] < 0) fail("bad branch input index");
        seq->body.push_back(copy(op.in[k], g.inputs[i]));
      }
      auto call = std::make_unique<CallFn>();
      call->fn = function_for(gid);
      seq->body.push_back(std::move(call));
      for (size_t i = 0; i < op.out.size(); ++i) seq->body.push_back(copy(g.outputs[i], op.out[i]));
      return seq;
    };
    auto p = std::make_unique<If>();
    p->cond = &refs_[op.in[0]];
    if (p->cond->nelms != 1) fail("the condition must have exactly one element");
    p->then_p = branch(op.graphs[0], then_in);
    p->else_p = branch(op.graphs[1], else_in);
    return p;
  }

  if (op.type == "HostLoad" || op.type == "HostStore") {
    int64_t s = op.attrs.i("stream");
    if (s < 0 || s >= (int64_t)desc_->streams.size()) fail("unknown stream");
    const auto& sd = desc_->streams[s];
    bool load = op.type == "HostLoad";
    if (sd.host_to_device != load)
      fail(std::string("stream '") + sd.name + "' is not a " +
           (load ? "host-to-device" : "device-to-host") + " stream");
    int t = load ? (op.out.size() == 1 ? op.out[0] : -1) : (op.in.size() == 1 ? op.in[0] : -1);
    if (t < 0) fail("expected exactly one tensor");
    const auto& r = refs_[t];
    if (r.dtype != sd.dtype || r.shape != sd.shape)
      fail("tensor '" + r.name + "' " + dtype_name(r.dtype) + shape_str(r.shape) +
           " does not match stream '" + sd.name + "' " + dtype_name(sd.dtype) +
           shape_str(sd.shape));
    if (load) {
      auto p = std::make_unique<StreamToTensor>();
      p->stream = (int)s;
      p->dst = &refs_[t];
      p->stream_name = sd.name;
      return p;
    }
    auto p = std::make_unique<TensorToStream>();
    p->stream = (int)s;
    p->src = &refs_[t];
    p->stream_name = sd.name;
    return p;
  }

  const KernelFactory* f = KernelRegistry::find(op.type);
  if (!f) throw NotImplemented("ipuxl core has no kernel for op type '" + op.type + "' (op '" +
                               op.name + "')");
  OpDesc d;
  d.type = op.type;
  d.name = op.name;
  d.attrs = op.attrs;
  // Inputs that only the host ever writes (weights no op updates,
  // constants): kernels may cache work derived from them across runs.
  {
    std::vector<int64_t> fixed;
    for (size_t i = 0; i < op.in.size(); ++i) {
      int t = op.in[i];
      if (t < 0) continue;
      auto kind = desc_->tensors[root_[t]].kind;
      if ((kind == TensorKind::Variable || kind == TensorKind::Constant) &&
          !program_written_.count(root_[t]))
        fixed.push_back((int64_t)i);
    }
    if (!fixed.empty()) d.attrs.values["__host_only_inputs"] = fixed;
  }
  for (int t : op.in) d.in.push_back(t < 0 ? nullptr : &refs_[t]);
  for (int t : op.out) d.out.push_back(&refs_[t]);
  auto ex = std::make_unique<Execute>();
  ex->kernel = (*f)(d);
  if (!ex->kernel) fail("kernel factory returned nothing");
  ex->label = op.type + ":" + op.name;
  profiles_.push_back(std::make_unique<ExecProfile>());
  profiles_.back()->label = ex->label;
  ex->prof = profiles_.back().get();
  return ex;
}

void Engine::run(std::vector<StreamBinding> bindings) {
  if (bindings.size() != desc_->streams.size())
    throw Error("Engine.run: expected " + std::to_string(desc_->streams.size()) +
                " stream bindings, got " + std::to_string(bindings.size()));
  Exec ex;
  ex.desc = desc_.get();
  ex.ctx.run_index = run_index_++;
  ex.ctx.host_write_epoch = host_write_epoch_;
  ex.streams = std::move(bindings);
  ex.profiling = profiling_;
  main_->run(ex);
}

void Engine::write_tensor(int tensor, const uint8_t* src, size_t nbytes) {
  desc_->check_tensor(tensor, "write_tensor");
  auto& r = refs_[tensor];
  if (nbytes != r.nbytes())
    throw Error("write_tensor '" + r.name + "': got " + std::to_string(nbytes) +
                " bytes, expected " + std::to_string(r.nbytes()));
  if (r.data != src) std::memcpy(r.data, src, nbytes);  // equal: bound to the host array
  host_write_epoch_++;  // kernels' caches of host-only tensors are stale either way
}

bool Engine::program_writes(int tensor) const {
  desc_->check_tensor(tensor, "program_writes");
  return program_written_.count(root_[tensor]) != 0;
}

void Engine::bind_external(int tensor, uint8_t* data, size_t nbytes) {
  desc_->check_tensor(tensor, "bind_external");
  const auto& td = desc_->tensors[tensor];
  auto& r = refs_[tensor];
  if (td.kind != TensorKind::Variable || td.graph != main_graph_ || root_[tensor] != tensor)
    throw Error("bind_external '" + r.name + "': only a main-graph variable can use host memory");
  if (nbytes != r.nbytes())
    throw Error("bind_external '" + r.name + "': got " + std::to_string(nbytes) +
                " bytes, expected " + std::to_string(r.nbytes()));
  if (reinterpret_cast<uintptr_t>(data) % 64 != 0)
    throw Error("bind_external '" + r.name + "': host memory must be 64-byte aligned");
  // Kernels, copies and call-site binds read each TensorRef's data pointer
  // when they run, so repointing every alias of the variable is enough.
  arena_home_.emplace(tensor, home_[tensor]);
  for (int m : members_[tensor]) refs_[m].data = data;
  home_[tensor] = data;
  host_write_epoch_++;
}

void Engine::unbind_external(int tensor) {
  desc_->check_tensor(tensor, "unbind_external");
  auto it = arena_home_.find(tensor);
  if (it == arena_home_.end()) return;
  std::memcpy(it->second, refs_[tensor].data, refs_[tensor].nbytes());
  for (int m : members_[tensor]) refs_[m].data = it->second;
  home_[tensor] = it->second;
  arena_home_.erase(it);
  host_write_epoch_++;
}

void Engine::read_tensor(int tensor, uint8_t* dst, size_t nbytes) const {
  desc_->check_tensor(tensor, "read_tensor");
  const auto& r = refs_[tensor];
  if (nbytes != r.nbytes())
    throw Error("read_tensor '" + r.name + "': got " + std::to_string(nbytes) +
                " bytes, expected " + std::to_string(r.nbytes()));
  if (dst != r.data) std::memcpy(dst, r.data, nbytes);
}

std::string Engine::describe() const {
  std::ostringstream os;
  for (auto& kv : functions_) {
    os << "Function " << kv.second->name << ":\n";
    kv.second->body->describe(os, 1);
  }
  os << "Program:\n";
  main_->describe(os, 1);
  return os.str();
}

std::vector<ExecProfile> Engine::profile() const {
  std::vector<ExecProfile> out;
  for (auto& p : profiles_) out.push_back(*p);
  return out;
}

std::map<std::string, int64_t> Engine::program_counts() const {
  std::map<std::string, int64_t> c;
  for (auto& kv : functions_) kv.second->body->count(c);
  main_->count(c);
  c["Function"] = (int64_t)functions_.size();
  return c;
}

}  // namespace ipuxl
