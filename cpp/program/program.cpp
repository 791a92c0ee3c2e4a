#include "program.hpp"

#include <algorithm>

namespace ipuxl {

// The names of enum values are the Python frontend's names (the bindings
// export them): keep them lower case, and in step with the enums.
const char* tensor_kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::Intermediate: return "intermediate";
    case TensorKind::Input: return "input";
    case TensorKind::Constant: return "constant";
    case TensorKind::Variable: return "variable";
  }
  return "?";
}

const char* op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::Kernel: return "kernel";
    case OpKind::Call: return "call";
    case OpKind::Repeat: return "repeat";
    case OpKind::If: return "if";
    case OpKind::HostLoad: return "host_load";
    case OpKind::HostStore: return "host_store";
    case OpKind::Collective: return "collective";
    case OpKind::RemoteLoad: return "remote_load";
    case OpKind::RemoteStore: return "remote_store";
    case OpKind::IpuCopy: return "ipu_copy";
  }
  return "?";
}

const char* collective_kind_name(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
  }
  return "?";
}

// PopXL's CollectiveOps names, plus "local".
const char* reduce_op_name(ReduceOp r) {
  switch (r) {
    case ReduceOp::Add: return "add";
    case ReduceOp::Mean: return "mean";
    case ReduceOp::Mul: return "mul";
    case ReduceOp::Min: return "min";
    case ReduceOp::Max: return "max";
    case ReduceOp::LogicalAnd: return "and";
    case ReduceOp::LogicalOr: return "or";
    case ReduceOp::SquareAdd: return "square_add";
    case ReduceOp::Local: return "local";
  }
  return "?";
}

const char* tile_set_name(TileSet t) { return t == TileSet::IO ? "io" : "compute"; }

const char* exec_context_name(ExecContext c) {
  switch (c) {
    case ExecContext::Normal: return "normal";
    case ExecContext::AccumulateOuterFragment: return "accumulate_outer";
    case ExecContext::WeightsFromHost: return "weights_from_host";
    case ExecContext::WeightsToHost: return "weights_to_host";
    case ExecContext::OptimizerFromHost: return "optimizer_from_host";
    case ExecContext::Subgraph: return "subgraph";
  }
  return "?";
}

const char* cost_class_name(CostClass c) {
  switch (c) {
    case CostClass::None: return "none";
    case CostClass::Elementwise: return "elementwise";
    case CostClass::Matmul: return "matmul";
    case CostClass::Conv: return "conv";
    case CostClass::ConvDataGrad: return "conv_data_grad";
    case CostClass::ConvWeightsGrad: return "conv_weights_grad";
    case CostClass::Pool: return "pool";
    case CostClass::Norm: return "norm";
    case CostClass::Reduce: return "reduce";
    case CostClass::Sort: return "sort";
    case CostClass::Scan: return "scan";
    case CostClass::Softmax: return "softmax";
    case CostClass::Loss: return "loss";
    case CostClass::Gather: return "gather";
    case CostClass::Scatter: return "scatter";
    case CostClass::Copy: return "copy";
    case CostClass::Rearrange: return "rearrange";
    case CostClass::View: return "view";
    case CostClass::Fill: return "fill";
    case CostClass::Random: return "random";
    case CostClass::Print: return "print";
    case CostClass::CodeLoad: return "code_load";
    case CostClass::Collective: return "collective";
    case CostClass::Program: return "program";
  }
  return "?";
}

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
                            TensorKind kind, Placement placement) {
  check_graph(graph, "add_tensor");
  int64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw Error("tensor '" + name + "' has a negative dimension " + shape_str(shape));
    if (d > 0 && n > INT64_MAX / d / 8)
      throw Error("tensor '" + name + "' of shape " + shape_str(shape) +
                  " has more elements than a 64-bit size can count");
    n *= d;
  }
  if (placement.ipu < 0) throw Error("tensor '" + name + "': negative ipu");
  TensorDesc t;
  t.name = name;
  t.dtype = dtype;
  t.shape = shape;
  t.kind = kind;
  t.graph = graph;
  t.placement = placement;
  tensors.push_back(std::move(t));
  return (int)tensors.size() - 1;
}

void ProgramDesc::set_tensor_data(int tensor, const uint8_t* data, size_t nbytes) {
  check_tensor(tensor, "set_tensor_data");
  auto& t = tensors[tensor];
  if (nbytes != t.nbytes())
    throw Error("tensor '" + t.name + "': data has " + std::to_string(nbytes) +
                " bytes, expected " + std::to_string(t.nbytes()));
  t.data.assign(data, data + nbytes);
}

int ProgramDesc::add_op(OpRecord op) {
  check_graph(op.graph, "add_op");
  const std::string who = op.type + " op '" + op.name + "'";
  for (int t : op.in)
    if (t != -1) check_tensor(t, who.c_str());
  for (int t : op.out) check_tensor(t, who.c_str());
  for (int g : op.graphs) check_graph(g, who.c_str());
  for (auto& a : op.aliases)
    if (a.first < 0 || a.first >= (int)op.out.size() || a.second < 0 ||
        a.second >= (int)op.in.size() || op.in[a.second] < 0)
      throw Error(who + ": invalid alias pair (" + std::to_string(a.first) + ", " +
                  std::to_string(a.second) + ")");
  for (int m : op.modified)
    if (m < 0 || m >= (int)op.in.size() || op.in[m] < 0)
      throw Error(who + ": modified input index " + std::to_string(m) + " is out of range");
  if (op.placement.ipu < 0) throw Error(who + ": negative ipu");
  op.attrs.op_name = op.name;
  ops.push_back(std::move(op));
  int id = (int)ops.size() - 1;
  graphs[ops.back().graph].ops.push_back(id);
  return id;
}

int ProgramDesc::add_stream(const std::string& name, DType dtype, const Shape& shape, bool h2d) {
  for (auto d : shape)
    if (d < 0) throw Error("stream '" + name + "' has a negative dimension " + shape_str(shape));
  streams.push_back(StreamDesc{name, dtype, shape, h2d});
  return (int)streams.size() - 1;
}

int ProgramDesc::add_remote_buffer(const std::string& name, DType dtype, const Shape& shape,
                                   int64_t entries) {
  for (auto d : shape)
    if (d < 0) throw Error("remote buffer '" + name + "' has a negative dimension " + shape_str(shape));
  if (entries < 1) throw Error("remote buffer '" + name + "' needs at least one entry");
  remote_buffers.push_back(RemoteBufferDesc{name, dtype, shape, entries});
  return (int)remote_buffers.size() - 1;
}

void ProgramDesc::set_graph_io(int graph, std::vector<int> inputs, std::vector<int> outputs) {
  check_graph(graph, "set_graph_io");
  for (int t : inputs) check_tensor(t, "graph input");
  for (int t : outputs) check_tensor(t, "graph output");
  graphs[graph].inputs = std::move(inputs);
  graphs[graph].outputs = std::move(outputs);
}

namespace {

std::string sig(const TensorDesc& t) { return std::string(dtype_name(t.dtype)) + shape_str(t.shape); }

}  // namespace

void ProgramDesc::validate_op(const OpRecord& op) const {
  auto fail = [&](const std::string& msg) -> void {
    throw Error(op.type + " op '" + op.name + "': " + msg);
  };
  for (int t : op.in)
    if (t >= 0 && tensors[t].graph != op.graph)
      fail("input '" + tensors[t].name + "' belongs to graph '" + graphs[tensors[t].graph].name +
           "', not to the op's graph '" + graphs[op.graph].name + "'");
  for (int t : op.out)
    if (tensors[t].graph != op.graph)
      fail("output '" + tensors[t].name + "' belongs to another graph");
  for (auto [o, i] : op.aliases)
    if (tensors[op.out[o]].nbytes() != tensors[op.in[i]].nbytes())
      fail("output '" + tensors[op.out[o]].name + "' aliases input '" + tensors[op.in[i]].name +
           "' but their sizes differ");
  auto match = [&](int caller, int callee, const char* what) {
    if (tensors[caller].dtype != tensors[callee].dtype || tensors[caller].shape != tensors[callee].shape)
      fail(std::string(what) + " '" + tensors[caller].name + "' " + sig(tensors[caller]) +
           " does not match '" + tensors[callee].name + "' " + sig(tensors[callee]) + " of graph '" +
           graphs[tensors[callee].graph].name + "'");
  };
  if (op.view_streaming_memory && op.kind != OpKind::RemoteLoad)
    fail("only a RemoteLoad can view Streaming Memory");
  if (op.write_host_directly && op.kind != OpKind::HostStore)
    fail("only a HostStore can write to the host array directly");
  if (op.code_load_graph != -1 && (op.cost_class != CostClass::CodeLoad || op.code_load_graph < 0 ||
                                   op.code_load_graph >= (int)graphs.size()))
    fail("a code load target must be a graph of the program, on a code_load op");
  switch (op.kind) {
    case OpKind::Kernel:
      if (!op.graphs.empty()) fail("a kernel op cannot call graphs");
      if (!KernelRegistry::find(op.kernel))
        throw NotImplemented("ipuxl core has no kernel '" + op.kernel + "' for op type '" +
                             op.type + "' (op '" + op.name + "')");
      return;
    case OpKind::Call:
    case OpKind::Repeat: {
      if (op.graphs.size() != 1) fail("expected exactly one called graph");
      const auto& g = graphs[op.graphs[0]];
      if (op.in.size() != g.inputs.size())
        fail("has " + std::to_string(op.in.size()) + " inputs but graph '" + g.name + "' has " +
             std::to_string(g.inputs.size()));
      if (op.out.size() != g.outputs.size())
        fail("has " + std::to_string(op.out.size()) + " outputs but graph '" + g.name + "' has " +
             std::to_string(g.outputs.size()));
      for (size_t i = 0; i < op.in.size(); ++i) {
        if (op.in[i] < 0) fail("all inputs of a call must be connected");
        match(op.in[i], g.inputs[i], "input");
      }
      for (size_t i = 0; i < op.out.size(); ++i) match(op.out[i], g.outputs[i], "output");
      if (op.kind == OpKind::Repeat) {
        if (op.trip_count < 0) fail("the repeat count must be >= 0");
        if (g.outputs.size() > g.inputs.size())
          fail("the repeated graph must have at least as many inputs as outputs");
        for (size_t i = 0; i < g.outputs.size(); ++i) {
          const auto &o = tensors[g.outputs[i]], &x = tensors[g.inputs[i]];
          if (o.shape != x.shape || o.dtype != x.dtype)
            fail("loop-carried output '" + o.name + "' " + sig(o) + " does not match input '" +
                 x.name + "' " + sig(x));
        }
      }
      return;
    }
    case OpKind::If: {
      if (op.graphs.size() != 2) fail("expected a then and an else graph");
      if (op.in.empty() || op.in[0] < 0) fail("missing condition input");
      if (tensors[op.in[0]].nelms() != 1) fail("the condition must have exactly one element");
      if (op.branch_inputs.size() != 2) fail("expected an input map for each branch");
      for (size_t b = 0; b < 2; ++b) {
        const auto& g = graphs[op.graphs[b]];
        const auto& map = op.branch_inputs[b];
        if (map.size() != g.inputs.size())
          fail("branch graph '" + g.name + "' has " + std::to_string(g.inputs.size()) +
               " inputs but " + std::to_string(map.size()) + " were connected");
        if (g.outputs.size() != op.out.size())
          fail("branch graph '" + g.name + "' has " + std::to_string(g.outputs.size()) +
               " outputs, expected " + std::to_string(op.out.size()));
        for (size_t i = 0; i < map.size(); ++i) {
          int k = map[i];
          if (k < 1 || k >= (int)op.in.size() || op.in[k] < 0) fail("bad branch input index");
          match(op.in[k], g.inputs[i], "input");
        }
        for (size_t i = 0; i < op.out.size(); ++i) match(op.out[i], g.outputs[i], "output");
      }
      if (!op.modified.empty()) fail("a conditional cannot write its inputs");
      return;
    }
    case OpKind::Collective: {
      if (op.in.size() != 1 || op.in[0] < 0 || op.out.size() != 1)
        fail("a collective has one input and one output");
      const auto& c = op.collective;
      const int total = total_replicas();
      if (!c.group_of.empty() && (int)c.group_of.size() != total)
        fail("the replica grouping names " + std::to_string(c.group_of.size()) +
             " replicas, the program has " + std::to_string(total));
      std::vector<int> size;
      for (int r = 0; r < total; ++r) {
        int g = c.group_of.empty() ? 0 : c.group_of[(size_t)r];
        if (g < 0 || g >= total) fail("bad group id " + std::to_string(g));
        if ((int)size.size() <= g) size.resize((size_t)g + 1, 0);
        size[(size_t)g]++;
      }
      int gsize = size.empty() ? 1 : size[0];
      for (int s : size)
        if (s != gsize) fail("replica groups must all have the same size");
      const auto &in = tensors[op.in[0]], &out = tensors[op.out[0]];
      if (in.dtype != out.dtype) fail("input and output dtypes differ");
      const int64_t n = in.nelms(), m = out.nelms();
      switch (c.kind) {
        case CollectiveKind::AllReduce:
          if (m != n) fail("an all-reduce keeps the element count");
          if (c.op == ReduceOp::Local) fail("an all-reduce needs a reduction");
          break;
        case CollectiveKind::AllGather:
          // The output may drop the zero padding of a sharded input (its
          // meta shape): it holds the first m <= n * gsize elements.
          if (m > n * gsize)
            fail("an all-gather over groups of " + std::to_string(gsize) + " gives " +
                 std::to_string(n * gsize) + " elements (the output takes the first of "
                 "them), the output has " + std::to_string(m));
          break;
        case CollectiveKind::ReduceScatter:
          if (m != (n + gsize - 1) / gsize)
            fail("a reduce-scatter over groups of " + std::to_string(gsize) + " gives " +
                 std::to_string((n + gsize - 1) / gsize) + " elements, the output has " +
                 std::to_string(m));
          break;
      }
      return;
    }
    case OpKind::RemoteLoad:
    case OpKind::RemoteStore: {
      if (op.remote_buffer < 0 || op.remote_buffer >= (int)remote_buffers.size())
        fail("unknown remote buffer");
      const auto& rb = remote_buffers[(size_t)op.remote_buffer];
      const bool load = op.kind == OpKind::RemoteLoad;
      // RemoteLoad: in = [destination or -1, offset or -1], out = [value].
      // RemoteStore: in = [value, offset or -1], out = [].
      if (op.in.size() != 2 || op.out.size() != (load ? 1u : 0u))
        fail(load ? "expected inputs (destination, offset) and one output"
                  : "expected inputs (tensor, offset) and no output");
      int t = load ? op.out[0] : op.in[0];
      if (t < 0) fail("missing tensor");
      const auto& r = tensors[t];
      if (r.dtype != rb.dtype || r.shape != rb.shape)
        fail("tensor '" + r.name + "' " + sig(r) + " does not match remote buffer '" + rb.name +
             "' " + dtype_name(rb.dtype) + shape_str(rb.shape));
      if (op.in[1] >= 0) {
        const auto& o = tensors[op.in[1]];
        if (o.nelms() != 1 || !(o.dtype == DType::Int32 || o.dtype == DType::UInt32 ||
                                o.dtype == DType::Int64 || o.dtype == DType::UInt64))
          fail("the offset '" + o.name + "' must be an integer scalar");
      }
      return;
    }
    case OpKind::IpuCopy: {
      if (op.in.size() != 1 || op.in[0] < 0 || op.out.size() != 1)
        fail("an IPU copy has one input and one output");
      if (!op.graphs.empty() || !op.modified.empty() || !op.aliases.empty())
        fail("an IPU copy calls no graph and writes no input");
      const auto &in = tensors[op.in[0]], &out = tensors[op.out[0]];
      if (in.dtype != out.dtype || in.shape != out.shape)
        fail("input '" + in.name + "' " + sig(in) + " and output '" + out.name + "' " + sig(out) +
             " differ");
      return;
    }
    case OpKind::HostLoad:
    case OpKind::HostStore: {
      if (op.stream < 0 || op.stream >= (int)streams.size()) fail("unknown stream");
      const auto& sd = streams[op.stream];
      const bool load = op.kind == OpKind::HostLoad;
      if (sd.host_to_device != load)
        fail(std::string("stream '") + sd.name + "' is not a " +
             (load ? "host-to-device" : "device-to-host") + " stream");
      int t = load ? (op.out.size() == 1 && op.in.empty() ? op.out[0] : -1)
                   : (op.in.size() == 1 && op.out.empty() ? op.in[0] : -1);
      if (t < 0) fail("expected exactly one tensor");
      const auto& r = tensors[t];
      if (r.dtype != sd.dtype || r.shape != sd.shape)
        fail("tensor '" + r.name + "' " + sig(r) + " does not match stream '" + sd.name + "' " +
             dtype_name(sd.dtype) + shape_str(sd.shape));
      return;
    }
  }
  fail("unknown op kind");
}

std::vector<int> ProgramDesc::validate(int main) const {
  check_graph(main, "validate");
  for (const auto& g : graphs)
    for (int op : g.ops) validate_op(ops[op]);
  for (const auto& g : graphs) {
    for (int t : g.inputs)
      if (tensors[t].graph != (int)(&g - graphs.data()))
        throw Error("graph '" + g.name + "': input '" + tensors[t].name + "' is not its tensor");
    for (int t : g.outputs)
      if (tensors[t].graph != (int)(&g - graphs.data()))
        throw Error("graph '" + g.name + "': output '" + tensors[t].name + "' is not its tensor");
  }
  // Depth-first post-order over the call graph with an explicit stack.
  // state: 0 unseen, 1 on the stack (being expanded), 2 done.
  std::vector<int> order, state(graphs.size(), 0);
  std::vector<std::pair<int, size_t>> stack;  // (graph, next op position to scan)
  std::vector<size_t> next_graph(graphs.size(), 0);
  stack.push_back({main, 0});
  state[main] = 1;
  while (!stack.empty()) {
    const int g = stack.back().first;
    size_t pos = stack.back().second;
    const auto& gops = graphs[g].ops;
    int child = -1;
    while (pos < gops.size()) {
      const auto& op = ops[gops[pos]];
      size_t& k = next_graph[g];
      if (k < op.graphs.size()) {
        int c = op.graphs[k++];
        if (state[c] == 1)
          throw Error("graph '" + graphs[c].name + "' calls itself (recursion through op '" +
                      op.name + "' of graph '" + graphs[g].name + "')");
        if (state[c] == 0) {
          child = c;
          break;
        }
      } else {
        k = 0;
        ++pos;
      }
    }
    stack.back().second = pos;
    if (child >= 0) {
      state[child] = 1;
      stack.push_back({child, 0});
      continue;
    }
    state[g] = 2;
    order.push_back(g);
    stack.pop_back();
  }
  return order;
}

}  // namespace ipuxl
