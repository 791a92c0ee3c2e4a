#include "lower.hpp"

#include <ostream>
#include <sstream>

namespace ipuxl {

const char* program_step_name(ProgramStep s) {
  switch (s) {
    case ProgramStep::Execute: return "Execute";
    case ProgramStep::Collective: return "Collective";
    case ProgramStep::RemoteCopy: return "RemoteCopy";
    case ProgramStep::Copy: return "Copy";
    case ProgramStep::IpuCopy: return "IpuCopy";
    case ProgramStep::Call: return "Call";
    case ProgramStep::Repeat: return "Repeat";
    case ProgramStep::If: return "If";
    case ProgramStep::StreamCopy: return "StreamCopy";
  }
  return "?";
}

const char* program_name(int id) {
  switch (id) {
    case kMainProgram: return "main";
    case kWeightsFromHostProgram: return "weights_from_host";
    case kWeightsToHostProgram: return "weights_to_host";
  }
  return "?";
}

namespace {

Node seq() { return Node{}; }

Node copy_node(int src, int dst) {
  Node c;
  c.kind = NodeKind::Copy;
  c.src = src;
  c.dst = dst;
  return c;
}

class Lowering {
 public:
  Lowering(const ProgramDesc& d, const Aliasing& al, const std::vector<std::set<int>>& written,
           Lowered& out)
      : d_(d), al_(al), written_(written), out_(out) {}

  Node graph_body(int g) {
    Node s = seq();
    for (int op_id : d_.graphs[g].ops) {
      const auto& op = d_.ops[op_id];
      if (op.skip) {
        out_.skipped_ops.push_back(op_id);
        continue;
      }
      s.body.push_back(lower_op(op_id));
    }
    return s;
  }

  Node lower_op(int op_id) {
    const auto& op = d_.ops[op_id];
    switch (op.kind) {
      case OpKind::Kernel: {
        Node e;
        e.kind = NodeKind::Execute;
        e.op = op_id;
        return e;
      }
      case OpKind::HostLoad:
      case OpKind::HostStore: {
        Node s;
        s.op = op_id;
        s.stream = op.stream;
        if (op.kind == OpKind::HostLoad) {
          s.kind = NodeKind::StreamIn;
          s.dst = op.out[0];
        } else {
          s.kind = NodeKind::StreamOut;
          s.src = op.in[0];
        }
        return s;
      }
      case OpKind::Collective:
      case OpKind::RemoteLoad:
      case OpKind::RemoteStore: {
        Node n;
        n.kind = op.kind == OpKind::Collective ? NodeKind::Collective
                 : op.kind == OpKind::RemoteLoad ? NodeKind::RemoteLoad
                                                 : NodeKind::RemoteStore;
        n.op = op_id;
        return n;
      }
      case OpKind::IpuCopy: {
        Node c = copy_node(op.in[0], op.out[0]);
        c.op = op_id;
        c.inter_ipu = true;
        return c;
      }
      case OpKind::Call:
      case OpKind::Repeat: return lower_call(op_id);
      case OpKind::If: return lower_if(op_id);
    }
    throw Error("op '" + op.name + "': unknown op kind");
  }

 private:
  // Which inputs/outputs of a call can use the caller's tensors in place
  // instead of being copied in/out.
  void plan_binding(const OpRecord& op, int graph, size_t carried, std::vector<bool>& in_place_in,
                    std::vector<bool>& in_place_out) {
    const auto& g = d_.graphs[graph];
    const auto& root = al_.root;
    const auto& written = written_[graph];
    std::map<int, int> parent_uses;
    for (int t : op.in) parent_uses[root[t]]++;
    std::set<int> input_roots;
    for (int t : g.inputs) input_roots.insert(root[t]);
    for (size_t i = carried; i < op.in.size(); ++i) {
      int child = g.inputs[i];
      if (root[child] != child) continue;
      // A written input may be the caller's tensor only when the write is
      // meant to reach the caller (marked modified) and no other input of
      // this call reads the same tensor.
      if (written.count(child) && !(op.writes_input((int)i) && parent_uses[root[op.in[i]]] == 1))
        continue;
      in_place_in[i] = true;
    }
    if (op.kind != OpKind::Call) return;  // a repeated body writes its outputs every iteration
    std::set<int> bound_out_roots;
    for (size_t i = 0; i < op.out.size(); ++i) {
      int r = root[g.outputs[i]];
      if (input_roots.count(r) || bound_out_roots.count(r)) continue;  // passthrough or repeated
      if (d_.tensors[r].kind != TensorKind::Intermediate) continue;    // constants keep their data
      if (root[op.out[i]] != op.out[i]) continue;
      bound_out_roots.insert(r);
      in_place_out[i] = true;
    }
  }

  Node bind_node(const OpRecord& op, size_t branch, const std::vector<bool>& in_place_in,
                 const std::vector<bool>& in_place_out) {
    const auto& g = d_.graphs[op.graphs[branch]];
    Node b;
    b.kind = NodeKind::Bind;
    std::set<int> done;
    auto add = [&](int child, int to) {
      int r = al_.root[child];
      if (!done.insert(r).second) return;
      BindItem it;
      it.group = al_.members[r];
      it.to = to;
      if (to >= 0) b.rebound++;
      b.bind.push_back(std::move(it));
    };
    // Bound tensors first, so a root shared by an input and an output (never
    // bound) is restored rather than skipped.
    for (size_t i = 0; i < g.inputs.size(); ++i)
      if (i < in_place_in.size() && in_place_in[i]) add(g.inputs[i], op.in[op.caller_input(branch, i)]);
    for (size_t i = 0; i < g.outputs.size(); ++i)
      if (i < in_place_out.size() && in_place_out[i]) add(g.outputs[i], op.out[i]);
    for (int t : g.inputs) add(t, -1);
    for (int t : g.outputs) add(t, -1);
    return b;
  }

  Node call_node(int graph) {
    Node c;
    c.kind = NodeKind::Call;
    c.fn = out_.fn_of_graph[graph];
    return c;
  }

  Node lower_call(int op_id) {
    const auto& op = d_.ops[op_id];
    const int graph = op.graphs[0];
    const auto& g = d_.graphs[graph];
    const bool is_call = op.kind == OpKind::Call;
    const size_t carried = is_call ? 0 : g.outputs.size();
    std::vector<bool> in_place_in(op.in.size(), false), in_place_out(op.out.size(), false);
    plan_binding(op, graph, carried, in_place_in, in_place_out);
    Node s = seq();
    s.op = op_id;
    s.body.push_back(bind_node(op, 0, in_place_in, in_place_out));
    for (size_t i = 0; i < op.in.size(); ++i)
      if (!in_place_in[i]) s.body.push_back(copy_node(op.in[i], g.inputs[i]));
    if (is_call) {
      s.body.push_back(call_node(graph));
      for (size_t i = 0; i < op.out.size(); ++i)
        if (!in_place_out[i]) s.body.push_back(copy_node(g.outputs[i], op.out[i]));
    } else {
      // Body: call, then carry output i into input i. Carried values that are
      // themselves inputs of the body would be clobbered by a direct copy, so
      // those go through a staging buffer.
      Node body = seq();
      body.body.push_back(call_node(graph));
      std::set<int> input_roots;
      for (int t : g.inputs) input_roots.insert(al_.root[t]);
      Node carry;
      carry.kind = NodeKind::Carry;
      for (size_t i = 0; i < g.outputs.size(); ++i) {
        int o = g.outputs[i], in = g.inputs[i];
        if (al_.root[o] == al_.root[in]) continue;
        (input_roots.count(al_.root[o]) ? carry.carry_staged : carry.carry_direct).push_back({o, in});
      }
      if (!carry.carry_direct.empty() || !carry.carry_staged.empty())
        body.body.push_back(std::move(carry));
      Node rep;
      rep.kind = NodeKind::Repeat;
      rep.count = op.trip_count;
      rep.body.push_back(std::move(body));
      s.body.push_back(std::move(rep));
      // After the loop the carried values live in the body's inputs.
      for (size_t i = 0; i < op.out.size(); ++i)
        s.body.push_back(copy_node(g.inputs[i], op.out[i]));
    }
    // Writes to inputs marked modified reach the caller (unless the input
    // was bound in place, when they were made in the caller's storage).
    for (int idx : op.modified)
      if (!in_place_in[(size_t)idx]) s.body.push_back(copy_node(g.inputs[idx], op.in[idx]));
    return s;
  }

  Node lower_if(int op_id) {
    const auto& op = d_.ops[op_id];
    Node n;
    n.kind = NodeKind::If;
    n.op = op_id;
    n.cond = op.in[0];
    for (size_t b = 0; b < 2; ++b) {
      const auto& g = d_.graphs[op.graphs[b]];
      Node s = seq();
      s.body.push_back(bind_node(op, b, std::vector<bool>(g.inputs.size(), false),
                                 std::vector<bool>(g.outputs.size(), false)));
      for (size_t i = 0; i < g.inputs.size(); ++i)
        s.body.push_back(copy_node(op.in[op.caller_input(b, i)], g.inputs[i]));
      s.body.push_back(call_node(op.graphs[b]));
      for (size_t i = 0; i < op.out.size(); ++i)
        s.body.push_back(copy_node(g.outputs[i], op.out[i]));
      n.body.push_back(std::move(s));
    }
    return n;
  }

  const ProgramDesc& d_;
  const Aliasing& al_;
  const std::vector<std::set<int>>& written_;
  Lowered& out_;
};

// ---------------------------------------------------------------- describe

void pad(std::ostream& os, int n) { os << std::string((size_t)n * 2, ' '); }

std::string placement_note(const ProgramDesc& d, const OpRecord& op) {
  std::ostringstream os;
  bool any = false;
  auto sep = [&]() { os << (any ? ", " : " ["); any = true; };
  if (op.placement.ipu != 0) { sep(); os << "ipu " << op.placement.ipu; }
  if (op.placement.tile_set != TileSet::Compute) { sep(); os << tile_set_name(op.placement.tile_set) << " tiles"; }
  if (op.context != ExecContext::Normal) { sep(); os << exec_context_name(op.context); }
  (void)d;
  if (any) os << "]";
  return os.str();
}

void describe_node(std::ostream& os, const Node& n, const Lowered& low, const ProgramDesc& d,
                   int indent) {
  const auto& T = d.tensors;
  switch (n.kind) {
    case NodeKind::Sequence:
      pad(os, indent);
      os << "Sequence\n";
      for (const auto& c : n.body) describe_node(os, c, low, d, indent + 1);
      return;
    case NodeKind::Execute: {
      const auto& op = d.ops[n.op];
      pad(os, indent);
      os << "Execute(" << op.kernel << ":" << op.name << ")" << placement_note(d, op) << "\n";
      return;
    }
    case NodeKind::Copy:
      pad(os, indent);
      os << "Copy(" << T[n.src].name << " -> " << T[n.dst].name << ")";
      if (n.inter_ipu) {
        const auto& op = d.ops[n.op];
        os << " [ipu " << op.placement.ipu << " -> ipu " << T[n.dst].placement.ipu;
        if (op.placement.tile_set != TileSet::Compute)
          os << ", " << tile_set_name(op.placement.tile_set) << " tiles";
        if (op.context != ExecContext::Normal) os << ", " << exec_context_name(op.context);
        os << "]";
      }
      os << "\n";
      return;
    case NodeKind::Bind:
      if (!n.rebound) return;
      pad(os, indent);
      os << "Bind(" << n.rebound << " caller tensors used in place)\n";
      return;
    case NodeKind::Call:
      pad(os, indent);
      os << "Call(" << low.functions[n.fn].name << ")\n";
      return;
    case NodeKind::Repeat:
      pad(os, indent);
      os << "Repeat(" << n.count << ")\n";
      describe_node(os, n.body[0], low, d, indent + 1);
      return;
    case NodeKind::If:
      pad(os, indent);
      os << "If(" << T[n.cond].name << ")" << placement_note(d, d.ops[n.op]) << "\n";
      describe_node(os, n.body[0], low, d, indent + 1);
      pad(os, indent);
      os << "Else\n";
      describe_node(os, n.body[1], low, d, indent + 1);
      return;
    case NodeKind::StreamIn:
      pad(os, indent);
      os << "StreamCopy(host -> " << T[n.dst].name << ", " << d.streams[n.stream].name << ")"
         << placement_note(d, d.ops[n.op]) << "\n";
      return;
    case NodeKind::StreamOut:
      pad(os, indent);
      os << "StreamCopy(" << T[n.src].name << " -> host, " << d.streams[n.stream].name << ")"
         << placement_note(d, d.ops[n.op]) << "\n";
      return;
    case NodeKind::Carry:
      pad(os, indent);
      os << "Copy(loop carry: " << n.carry_direct.size() << " direct, " << n.carry_staged.size()
         << " staged)\n";
      return;
    case NodeKind::Collective: {
      const auto& op = d.ops[n.op];
      static const char* kinds[] = {"AllReduce", "AllGather", "ReduceScatter"};
      pad(os, indent);
      os << "Collective(" << kinds[(int)op.collective.kind] << " "
         << reduce_op_name(op.collective.op) << ": " << T[op.in[0]].name << " -> "
         << T[op.out[0]].name << ")" << placement_note(d, op) << "\n";
      return;
    }
    case NodeKind::RemoteLoad:
    case NodeKind::RemoteStore: {
      const auto& op = d.ops[n.op];
      const auto& rb = d.remote_buffers[(size_t)op.remote_buffer];
      std::string at = op.in[1] >= 0 ? T[op.in[1]].name : std::string("0");
      pad(os, indent);
      if (n.kind == NodeKind::RemoteLoad && op.view_streaming_memory)
        os << "RemoteView(" << rb.name << "[" << at << "] viewed by " << T[op.out[0]].name << ")";
      else if (n.kind == NodeKind::RemoteLoad)
        os << "RemoteCopy(" << rb.name << "[" << at << "] -> " << T[op.out[0]].name << ")";
      else
        os << "RemoteCopy(" << T[op.in[0]].name << " -> " << rb.name << "[" << at << "])";
      os << placement_note(d, op) << "\n";
      return;
    }
  }
}

void count_node(const Node& n, std::map<std::string, int64_t>& c) {
  switch (n.kind) {
    case NodeKind::Sequence: c["Sequence"]++; break;
    case NodeKind::Execute: c["Execute"]++; break;
    case NodeKind::Copy:
      c["Copy"]++;
      if (n.inter_ipu) c["IpuCopy"]++;
      break;
    case NodeKind::Bind: c["ElidedCopy"] += n.rebound; break;
    case NodeKind::Call: c["Call"]++; break;
    case NodeKind::Repeat: c["Repeat"]++; break;
    case NodeKind::If: c["If"]++; break;
    case NodeKind::StreamIn:
    case NodeKind::StreamOut: c["StreamCopy"]++; break;
    case NodeKind::Carry:
      c["Copy"] += (int64_t)(n.carry_direct.size() + 2 * n.carry_staged.size());
      break;
    case NodeKind::Collective: c["Collective"]++; break;
    case NodeKind::RemoteLoad:
    case NodeKind::RemoteStore: c["RemoteCopy"]++; break;
  }
  for (const auto& b : n.body) count_node(b, c);
}

}  // namespace

Lowered lower_program(const ProgramDesc& desc, int main, const std::vector<int>& order,
                      const Aliasing& al, const std::vector<std::set<int>>& written) {
  Lowered out;
  out.fn_of_graph.assign(desc.graphs.size(), -1);
  Lowering l(desc, al, written, out);
  // Callees first, so that every call site finds its Function.
  for (int g : order) {
    if (g == main) continue;
    Function fn;
    fn.graph = g;
    fn.name = desc.graphs[g].name;
    fn.body = l.graph_body(g);
    out.fn_of_graph[g] = (int)out.functions.size();
    out.functions.push_back(std::move(fn));
  }
  for (auto& p : out.programs) p = Node{};
  for (int op_id : desc.graphs[main].ops) {
    const auto& op = desc.ops[op_id];
    if (op.skip) {
      out.skipped_ops.push_back(op_id);
      continue;
    }
    int prog = op.context == ExecContext::WeightsFromHost ? kWeightsFromHostProgram
               : op.context == ExecContext::WeightsToHost ? kWeightsToHostProgram
                                                           : kMainProgram;
    out.programs[prog].body.push_back(l.lower_op(op_id));
  }
  return out;
}

std::string describe(const Lowered& low, const ProgramDesc& desc) {
  std::ostringstream os;
  for (const auto& fn : low.functions) {
    os << "Function " << fn.name << ":\n";
    describe_node(os, fn.body, low, desc, 1);
  }
  os << "Program:\n";
  describe_node(os, low.programs[kMainProgram], low, desc, 1);
  for (int p = 1; p < kNumPrograms; ++p) {
    if (low.programs[p].body.empty()) continue;
    os << "Program " << program_name(p) << ":\n";
    describe_node(os, low.programs[p], low, desc, 1);
  }
  return os.str();
}

std::map<std::string, int64_t> count_nodes(const Lowered& low) {
  std::map<std::string, int64_t> c;
  for (const auto& fn : low.functions) count_node(fn.body, c);
  count_node(low.programs[kMainProgram], c);
  for (int p = 1; p < kNumPrograms; ++p)
    if (!low.programs[p].body.empty()) count_node(low.programs[p], c);
  c["Function"] = (int64_t)low.functions.size();
  return c;
}

}  // namespace ipuxl
