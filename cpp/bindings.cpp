// Python bindings of the core: a ProgramDesc builder and the Engine.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <thread>
#include <tuple>

#include "core/blas.hpp"
#include "exec/engine.hpp"
#include "core/gemm.hpp"
#include "core/isa.hpp"
#include "core/parallel.hpp"
#include "kernels/conv/options.hpp"
#include "model/model.hpp"

namespace py = pybind11;

namespace ipuxl {
void bind_options(py::module_& m);  // bindings_options.cpp
}
using namespace ipuxl;

namespace {

DType to_dtype(int code) {
  if (!dtype_is_valid(code)) throw Error("invalid dtype code " + std::to_string(code));
  return static_cast<DType>(code);
}

AttrValue to_attr(const std::string& key, const py::handle& v) {
  if (py::isinstance<py::bool_>(v)) return (int64_t)v.cast<bool>();
  if (py::isinstance<py::int_>(v)) {
    // Python ints are unbounded: one that int64 cannot hold is named here
    // rather than reaching pybind's generic cast error.
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
    if (overflow)
      throw Error("attribute '" + key + "': " + py::str(v).cast<std::string>() +
                  " does not fit in int64");
    return (int64_t)x;
  }
  if (py::isinstance<py::float_>(v)) return v.cast<double>();
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    auto seq = v.cast<py::sequence>();
    bool all_int = true;
    for (auto item : seq)
      if (!(py::isinstance<py::int_>(item) || py::isinstance<py::bool_>(item))) all_int = false;
    if (all_int) {
      std::vector<int64_t> out;
      for (auto item : seq) out.push_back(item.cast<int64_t>());
      return out;
    }
    std::vector<double> out;
    for (auto item : seq) out.push_back(item.cast<double>());
    return out;
  }
  throw Error("attribute '" + key + "' has an unsupported type " +
              py::str(py::type::of(v)).cast<std::string>());
}

// A host array passed to the core: must be C-contiguous with the expected size.
py::buffer_info checked_buffer(const py::array& a, size_t min_bytes, bool writable,
                               const std::string& what) {
  if (!(a.flags() & py::array::c_style))
    throw Error(what + ": array must be C-contiguous");
  if (writable && !a.writeable()) throw Error(what + ": array is read-only");
  py::buffer_info info = a.request(writable);
  size_t nbytes = (size_t)info.size * (size_t)info.itemsize;
  if (nbytes < min_bytes)
    throw Error(what + ": array has " + std::to_string(nbytes) + " bytes, need at least " +
                std::to_string(min_bytes));
  return info;
}


// ---- the IPU model (cpp/model): options from a dict, the report as a dict
model::Options model_options(const py::dict& d) {
  model::Options o;
  for (auto kv : d) {
    const auto k = kv.first.cast<std::string>();
    const py::handle v = kv.second;
    if (v.is_none()) continue;
    if (k == "version") o.version = v.cast<std::string>();
    else if (k == "tiles_per_ipu") o.tiles_per_ipu = v.cast<int>();
    else if (k == "num_ipus") o.num_ipus = v.cast<int>();
    else if (k == "num_io_tiles") o.num_io_tiles = v.cast<int>();
    else if (k == "memory_per_tile") o.bytes_per_tile = v.cast<int64_t>();
    else if (k == "clock_hz") o.clock_hz = v.cast<double>();
    else if (k == "host_bandwidth") o.host_bytes_per_second = v.cast<double>();
    else if (k == "streaming_bandwidth") o.streaming_bytes_per_second = v.cast<double>();
    else if (k == "available_memory_proportion") o.available_memory_proportion = v.cast<double>();
    else throw Error("ipu_model: unknown option '" + k + "'");
  }
  return o;
}

template <class T>
py::array_t<T> to_array(const std::vector<T>& v) {
  py::array_t<T> a((py::ssize_t)v.size());
  std::copy(v.begin(), v.end(), a.mutable_data());
  return a;
}

py::dict model_report(const ProgramDesc& d, const model::Report& r) {
  py::dict out;
  const auto& t = r.target;
  py::dict target;
  target["version"] = t.name;
  target["tiles_per_ipu"] = t.tiles_per_ipu;
  target["num_ipus"] = t.num_ipus;
  target["num_io_tiles"] = t.num_io_tiles;
  target["memory_per_tile"] = t.bytes_per_tile;
  target["code_region_bytes"] = t.code_region_bytes;
  target["clock_hz"] = t.clock_hz;
  target["host_bandwidth"] = t.host_bytes_per_second;
  target["streaming_bandwidth"] = t.streaming_bytes_per_second;
  target["exchange_bytes_per_cycle"] = t.exchange_bytes_per_cycle;
  target["workers"] = t.workers;
  target["available_memory_proportion"] = t.available_memory_proportion;
  out["target"] = target;
  py::dict per_tile;
  py::list cats;
  for (int c = 0; c < model::kNumCategories; ++c) {
    cats.append(model::category_name(c));
    per_tile[model::category_name(c)] = to_array(r.per_tile[c]);
  }
  out["categories"] = cats;
  out["per_tile"] = per_tile;
  out["loaded_code"] = to_array(r.loaded_code);
  // Ops, column by column (only those the model reached).
  std::vector<int> idx;
  for (const auto& o : r.ops)
    if (o.op >= 0) idx.push_back(o.op);
  py::list name, type, kind, cls, graph, vertex, plan;
  std::vector<int64_t> ipu, dest, obytes, tiles, cycles, comp, exch, temp, state, xcode, ccode;
  std::vector<double> execs, flops;
  for (int i : idx) {
    const auto& op = d.ops[i];
    const auto& o = r.ops[i];
    name.append(op.name);
    type.append(op.type);
    kind.append(op_kind_name(op.kind));
    // Ops of other kinds are costed by their kind: that names their class.
    cls.append(op.kind == OpKind::Kernel ? cost_class_name(op.cost_class) : op_kind_name(op.kind));
    graph.append(d.graphs[op.graph].name);
    vertex.append(o.vertex);
    plan.append(o.plan);
    ipu.push_back(o.ipu);
    // Where the results land (an ipu_copy's destination) and their bytes.
    dest.push_back(op.kind == OpKind::IpuCopy ? d.tensors[op.out[0]].placement.ipu : o.ipu);
    int64_t nb = 0;
    for (int t : op.out) nb += (int64_t)d.tensors[t].nbytes();
    obytes.push_back(nb);
    tiles.push_back(o.tiles);
    cycles.push_back(o.cycles);
    comp.push_back(o.compute_cycles);
    exch.push_back(o.exchange_cycles);
    temp.push_back(o.temp_bytes);
    state.push_back(o.state_bytes);
    xcode.push_back(o.exchange_code_bytes);
    ccode.push_back(o.control_code_bytes);
    execs.push_back(o.executions);
    flops.push_back(o.flops);
  }
  py::dict ops;
  ops["index"] = to_array(std::vector<int64_t>(idx.begin(), idx.end()));
  ops["name"] = name;
  ops["type"] = type;
  ops["kind"] = kind;
  ops["cost_class"] = cls;
  ops["graph"] = graph;
  ops["vertex"] = vertex;
  ops["plan"] = plan;
  ops["ipu"] = to_array(ipu);
  ops["destination"] = to_array(dest);
  ops["bytes"] = to_array(obytes);
  ops["tiles"] = to_array(tiles);
  ops["cycles"] = to_array(cycles);
  ops["compute_cycles"] = to_array(comp);
  ops["exchange_cycles"] = to_array(exch);
  ops["executions"] = to_array(execs);
  ops["flops"] = to_array(flops);
  ops["temp_bytes"] = to_array(temp);
  ops["state_bytes"] = to_array(state);
  ops["exchange_code_bytes"] = to_array(xcode);
  ops["control_code_bytes"] = to_array(ccode);
  out["ops"] = ops;
  py::list graphs;
  for (const auto& g : r.graphs) {
    py::dict e;
    e["name"] = d.graphs[g.graph].name;
    e["main"] = g.graph == r.main_graph;
    e["function"] = g.function;
    e["code_instances"] = g.code_instances;
    e["call_sites"] = g.call_sites;
    e["if_sites"] = g.if_sites;
    e["code_loaded"] = g.code_loaded;
    e["executions"] = g.executions;
    e["cycles"] = g.cycles;
    e["code_bytes"] = g.code_bytes;
    e["ops"] = g.ops;
    graphs.append(e);
  }
  out["graphs"] = graphs;
  py::list skind, slabel;
  std::vector<int64_t> sop, scyc, slive, smax;
  for (const auto& s : r.steps) {
    skind.append(s.kind);
    slabel.append(s.label);
    sop.push_back(s.op);
    scyc.push_back(s.cycles);
    slive.push_back(s.live_bytes);
    smax.push_back(s.max_tile_live);
  }
  py::dict steps;
  steps["kind"] = skind;
  steps["label"] = slabel;
  steps["op"] = to_array(sop);
  steps["cycles"] = to_array(scyc);
  steps["live_bytes"] = to_array(slive);
  steps["max_tile_live"] = to_array(smax);
  out["steps"] = steps;
  py::list tname, tgraph;
  std::vector<int64_t> tbytes, tipu, tfirst, ttiles, tper;
  std::vector<uint8_t> tal;
  for (const auto& tr : r.tensors) {
    if (tr.tiles <= 0) continue;
    const auto& te = d.tensors[tr.tensor];
    tname.append(te.name);
    tgraph.append(d.graphs[te.graph].name);
    tbytes.push_back((int64_t)te.nbytes());
    tipu.push_back(tr.ipu);
    tfirst.push_back(tr.first_tile);
    ttiles.push_back(tr.tiles);
    tper.push_back(tr.bytes_per_tile);
    tal.push_back(tr.always_live ? 1 : 0);
  }
  py::dict tensors;
  tensors["name"] = tname;
  tensors["graph"] = tgraph;
  tensors["bytes"] = to_array(tbytes);
  tensors["ipu"] = to_array(tipu);
  tensors["first_tile"] = to_array(tfirst);
  tensors["tiles"] = to_array(ttiles);
  tensors["bytes_per_tile"] = to_array(tper);
  tensors["always_live"] = to_array(tal);
  out["tensors"] = tensors;
  py::list rbs;
  for (const auto& rb : r.remote_buffers) {
    py::dict e;
    e["name"] = rb.name;
    e["entries"] = rb.entries;
    e["entry_bytes"] = rb.entry_bytes;
    e["streaming_bytes"] = rb.streaming_bytes;
    e["pads"] = rb.pads;
    e["pad_bytes"] = rb.pad_bytes;
    e["loads"] = rb.loads;
    e["stores"] = rb.stores;
    rbs.append(e);
  }
  out["remote_buffers"] = rbs;
  py::dict vt;
  for (const auto& [n, b] : r.vertex_types) {
    py::dict e;
    e["code_bytes"] = b;
    e["tiles"] = r.vertex_type_tiles.at(n);
    vt[py::str(n)] = e;
  }
  out["vertex_types"] = vt;
  out["total_cycles"] = r.total_cycles;
  out["weights_from_host_cycles"] = r.weights_from_host_cycles;
  out["weights_to_host_cycles"] = r.weights_to_host_cycles;
  py::list warns;
  for (const auto& w : r.warnings) warns.append(w);
  out["warnings"] = warns;
  return out;
}


// Exports enum E to Python with its C++ names (name_of) for its codes
// 0..count-1: the frontend's tables are read from these.
template <class E>
void export_enum(py::module_& m, const char* py_name, int count, const char* (*name_of)(E),
                 const char* doc) {
  py::enum_<E> e(m, py_name, doc);
  for (int i = 0; i < count; ++i) e.value(name_of((E)i), (E)i);
}

// A code received from Python, checked against its enum's bound.
template <class E>
E checked_code(int code, int count, const std::string& op, const char* what) {
  if (code < 0 || code >= count)
    throw Error("op '" + op + "': invalid " + what + " " + std::to_string(code) + " (expected 0.." +
                std::to_string(count - 1) + ")");
  return (E)code;
}

std::pair<int64_t, int64_t> pair_of(const std::vector<int64_t>& v, const std::string& op,
                                    const char* what) {
  if (v.empty()) return {0, 0};
  if (v.size() != 2) throw Error("op '" + op + "': " + what + " takes (other dtypes, float16)");
  return {v[0], v[1]};
}

// Every entry point into one Engine runs under the Engine's mutex, so two
// Python threads using one Session (or one Engine) are serialised instead
// of racing. The mutex is taken with the GIL released: a run holds it while
// it calls back into Python (the exchange between instances, the signal
// poll), so waiting for it while holding the GIL could deadlock.
template <class F>
auto locked(const Engine& e, F&& f) -> decltype(f()) {
  py::gil_scoped_release nogil;
  std::lock_guard<std::mutex> lock(e.mutex());
  return f();
}

// The identity of the interpreter's main thread, where Python runs signal
// handlers (Engine.run polls for them only there).
unsigned long main_thread_ident() {
  static const unsigned long ident =
      py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>();
  return ident;
}

}  // namespace

PYBIND11_MODULE(_core, m) {
  m.doc() = "ipuxl C++ core: lowering, memory planning and the IPU-model engine";

  m.attr("split_all_reduce_bytes") = kSplitAllReduceBytes;  // see collectives.hpp
  bind_options(m);  // the core's options: bindings_options.cpp

  export_enum<DType>(m, "DType", kNumDTypes, dtype_name, "Element types (PopXL's names).");
  export_enum<TensorKind>(m, "TensorKind", kNumTensorKinds, tensor_kind_name,
                          "What a tensor of a ProgramDesc is.");
  export_enum<OpKind>(m, "OpKind", kNumOpKinds, op_kind_name,
                      "How the lowering treats an op (OpDef.kind).");
  export_enum<CollectiveKind>(m, "CollectiveKind", kNumCollectiveKinds, collective_kind_name,
                              "What a collective computes across replicas.");
  export_enum<ReduceOp>(m, "ReduceOp", kNumReduceOps, reduce_op_name,
                        "Reductions of collectives (PopXL's CollectiveOps, and 'local').");
  export_enum<TileSet>(m, "TileSet", kNumTileSets, tile_set_name, "Compute or IO tiles.");
  export_enum<ExecContext>(m, "ExecContext", kNumExecContexts, exec_context_name,
                           "PopART's execution contexts.");
  export_enum<CostClass>(m, "CostClass", kNumCostClasses, cost_class_name,
                         "The IPU model's cost classes (OpDef.cost).");
  m.def("dtype_size", [](DType t) { return dtype_size(t); }, py::arg("dtype"),
        "Bytes per element of a dtype in the core.");

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const NotImplemented& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const OutOfMemory& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const RunError& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  py::class_<ProgramDesc, std::shared_ptr<ProgramDesc>>(m, "ProgramDesc")
      .def(py::init<>())
      .def("add_graph", &ProgramDesc::add_graph)
      .def(
          "add_tensor",
          [](ProgramDesc& d, int graph, const std::string& name, int dtype, Shape shape, int kind,
             int ipu, int tile_set) {
            return d.add_tensor(
                graph, name, to_dtype(dtype), shape,
                checked_code<TensorKind>(kind, kNumTensorKinds, name, "tensor kind"),
                Placement{ipu, checked_code<TileSet>(tile_set, kNumTileSets, name, "tile set")});
          },
          py::arg("graph"), py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("kind"),
          py::arg("ipu") = 0, py::arg("tile_set") = 0)
      .def("set_tensor_data",
           [](ProgramDesc& d, int t, const py::array& a) {
             auto info = checked_buffer(a, 0, false, "set_tensor_data");
             d.set_tensor_data(t, static_cast<const uint8_t*>(info.ptr),
                               (size_t)info.size * (size_t)info.itemsize);
           })
      .def(
          "add_op",
          [](ProgramDesc& d, int graph, const std::string& type, const std::string& name,
             std::vector<int> in, std::vector<int> out, const py::dict& attrs,
             std::vector<int> graphs, std::vector<std::pair<int, int>> aliases,
             const std::string& kernel, int kind, std::vector<int> modified,
             bool side_effects, int ipu, int tile_set, int context, int stream,
             int64_t trip_count, std::vector<std::vector<int>> branch_inputs, bool skip,
             int cost_class, int remote_buffer, int collective_kind,
             int reduce_op, std::vector<int> group_of, int exchange_group,
             const std::string& cost_vertex, std::vector<int64_t> cost_header,
             std::vector<int64_t> cost_per_vector, std::vector<int64_t> cost_unroll,
             bool view_streaming_memory, bool write_host_directly, int code_load_graph) {
            OpRecord r;
            r.type = type;
            r.kernel = kernel.empty() && kind == 0 ? type : kernel;
            r.name = name;
            r.kind = checked_code<OpKind>(kind, kNumOpKinds, name, "op kind");
            r.graph = graph;
            r.in = std::move(in);
            r.out = std::move(out);
            for (auto kv : attrs) {
              auto k = kv.first.cast<std::string>();
              r.attrs.values[k] = to_attr(k, kv.second);
            }
            r.graphs = std::move(graphs);
            r.aliases = std::move(aliases);
            r.modified = std::move(modified);
            r.side_effects = side_effects;
            r.placement = Placement{ipu, checked_code<TileSet>(tile_set, kNumTileSets, name,
                                                               "tile set")};
            r.context = checked_code<ExecContext>(context, kNumExecContexts, name, "context");
            r.stream = stream;
            r.trip_count = trip_count;
            r.branch_inputs = std::move(branch_inputs);
            r.skip = skip;
            r.cost_class = checked_code<CostClass>(cost_class, kNumCostClasses, name,
                                                   "cost class");
            r.cost.vertex = cost_vertex.empty() ? type : cost_vertex;
            std::tie(r.cost.header[0], r.cost.header[1]) = pair_of(cost_header, name, "header");
            std::tie(r.cost.per_vector[0], r.cost.per_vector[1]) =
                pair_of(cost_per_vector, name, "per_vector");
            std::tie(r.cost.unroll[0], r.cost.unroll[1]) = pair_of(cost_unroll, name, "unroll");
            r.view_streaming_memory = view_streaming_memory;
            r.write_host_directly = write_host_directly;
            r.code_load_graph = code_load_graph;
            r.remote_buffer = remote_buffer;
            r.exchange_group = exchange_group;
            r.collective.kind = checked_code<CollectiveKind>(collective_kind, kNumCollectiveKinds,
                                                             name, "collective kind");
            r.collective.op = checked_code<ReduceOp>(reduce_op, kNumReduceOps, name, "reduction");
            r.collective.group_of = std::move(group_of);
            return d.add_op(std::move(r));
          },
          py::arg("graph"), py::arg("type"), py::arg("name"), py::arg("inputs"),
          py::arg("outputs"), py::arg("attrs"), py::arg("graphs"), py::arg("aliases"),
          py::arg("kernel") = "", py::arg("kind") = 0, py::arg("modified") = std::vector<int>{},
          py::arg("side_effects") = false, py::arg("ipu") = 0, py::arg("tile_set") = 0,
          py::arg("context") = 0, py::arg("stream") = -1, py::arg("trip_count") = 0,
          py::arg("branch_inputs") = std::vector<std::vector<int>>{}, py::arg("skip") = false,
          py::arg("cost_class") = 0, py::arg("remote_buffer") = -1,
          py::arg("collective_kind") = 0, py::arg("reduce_op") = 0,
          py::arg("group_of") = std::vector<int>{}, py::arg("exchange_group") = -1,
          py::arg("cost_vertex") = "", py::arg("cost_header") = std::vector<int64_t>{},
          py::arg("cost_per_vector") = std::vector<int64_t>{},
          py::arg("cost_unroll") = std::vector<int64_t>{},
          py::arg("view_streaming_memory") = false, py::arg("write_host_directly") = false,
          py::arg("code_load_graph") = -1,
          "Adds an op record. kind, tile_set, context, collective_kind, reduce_op and "
          "cost_class are codes of the enums OpKind, TileSet, ExecContext, CollectiveKind, "
          "ReduceOp and CostClass of this module (collective: group_of is the group of each "
          "replica; remote_load / remote_store: remote_buffer; ipu_copy: ipu is the source IPU, "
          "the output tensor's placement the destination); exchange_group: ops merged into one "
          "MultiExchange share it; kernel defaults to the type; cost_vertex (default: the type), "
          "cost_header, cost_per_vector, cost_unroll: the cost class's parameters, each (other "
          "dtypes, float16) or empty; view_streaming_memory (remote_load) and "
          "write_host_directly (host_store): host-pass decisions; code_load_graph: the graph a "
          "code_load op loads.")
      .def(
          "add_remote_buffer",
          [](ProgramDesc& d, const std::string& name, int dtype, Shape shape, int64_t entries) {
            return d.add_remote_buffer(name, to_dtype(dtype), shape, entries);
          },
          py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("entries"))
      .def_property(
          "replicas", [](const ProgramDesc& d) { return d.replicas; },
          [](ProgramDesc& d, int r) {
            if (r < 1) throw Error("replicas must be >= 1, got " + std::to_string(r));
            d.replicas = r;
          })
      .def_property(
          "global_replicas", [](const ProgramDesc& d) { return d.total_replicas(); },
          [](ProgramDesc& d, int r) {
            if (r < d.replicas || r % d.replicas != 0)
              throw Error("global_replicas must be a multiple of replicas (" +
                          std::to_string(d.replicas) + "), got " + std::to_string(r));
            d.global_replicas = r;
          },
          "Replicas of all instances (processes) together; collective groups name them.")
      .def(
          "add_stream",
          [](ProgramDesc& d, const std::string& name, int dtype, Shape shape, bool h2d) {
            return d.add_stream(name, to_dtype(dtype), shape, h2d);
          })
      .def("set_graph_io", &ProgramDesc::set_graph_io)
      .def_property_readonly("num_tensors", [](const ProgramDesc& d) { return d.tensors.size(); })
      .def_property_readonly("num_ops", [](const ProgramDesc& d) { return d.ops.size(); });

  py::class_<Engine>(m, "Engine")
      .def(py::init([](std::shared_ptr<ProgramDesc> d, int main_graph,
                       std::shared_ptr<ProgramDesc> faithful) {
             return std::make_unique<Engine>(std::const_pointer_cast<const ProgramDesc>(d),
                                             main_graph,
                                             std::const_pointer_cast<const ProgramDesc>(faithful));
           }),
           py::arg("desc"), py::arg("main_graph"), py::arg("faithful") = nullptr)
      .def(
          "run",
          [](Engine& e, const std::vector<py::object>& streams, int64_t num_host_transfers,
             const std::vector<int64_t>& item_bytes, bool check_signals) {
            if (streams.size() != item_bytes.size())
              throw Error("Engine.run: streams and item_bytes differ in length");
            std::vector<StreamBinding> b(streams.size());
            std::vector<py::buffer_info> keep;
            keep.reserve(streams.size());
            for (size_t i = 0; i < streams.size(); ++i) {
              if (streams[i].is_none()) continue;
              auto arr = streams[i].cast<py::array>();
              size_t need = (size_t)num_host_transfers * (size_t)e.replicas() * (size_t)item_bytes[i];
              // Only device-to-host arrays are written; inputs may be read-only
              // (memory-mapped data sets).
              keep.push_back(checked_buffer(arr, need, !e.stream_is_input((int)i),
                                            "stream " + std::to_string(i)));
              b[i].data = static_cast<uint8_t*>(keep.back().ptr);
              b[i].items = num_host_transfers;
              b[i].item_bytes = (size_t)item_bytes[i];
            }
            // On the main thread a pending signal (Ctrl-C) stops the run
            // between two steps: the poll takes the GIL back briefly and
            // runs Python's handlers; KeyboardInterrupt propagates out.
            std::function<void()> poll;
            if (check_signals && PyThread_get_thread_ident() == main_thread_ident())
              poll = [] {
                py::gil_scoped_acquire gil;
                if (PyErr_CheckSignals() != 0) throw py::error_already_set();
              };
            return locked(e, [&] { return e.run(std::move(b), std::move(poll)); });
          },
          py::arg("streams"), py::arg("num_host_transfers"), py::arg("item_bytes"),
          py::arg("check_signals") = true)
      .def("run_weights_program",
           [](Engine& e, bool from_host) { locked(e, [&] { e.run_weights_program(from_host); }); },
           py::arg("from_host"))
      .def("has_weights_program", &Engine::has_weights_program, py::arg("from_host"))
      .def("write_tensor",
           [](Engine& e, int t, const py::array& a, int replica) {
             auto info = checked_buffer(a, 0, false, "write_tensor");
             locked(e, [&] {
               e.write_tensor(t, static_cast<const uint8_t*>(info.ptr),
                              (size_t)info.size * (size_t)info.itemsize, replica);
             });
           },
           py::arg("tensor"), py::arg("array"), py::arg("replica") = -1,
           "Copy host bytes into a tensor of one replica (-1: every replica).")
      .def("write_remote",
           [](Engine& e, int buffer, int64_t entry, int replica, const py::array& a) {
             auto info = checked_buffer(a, 0, false, "write_remote");
             locked(e, [&] {
               e.write_remote(buffer, entry, replica, static_cast<const uint8_t*>(info.ptr),
                              (size_t)info.size * (size_t)info.itemsize);
             });
           },
           py::arg("buffer"), py::arg("entry"), py::arg("replica"), py::arg("array"))
      .def("read_remote",
           [](const Engine& e, int buffer, int64_t entry, int replica, py::array& a) {
             auto info = checked_buffer(a, 0, true, "read_remote");
             locked(e, [&] {
               e.read_remote(buffer, entry, replica, static_cast<uint8_t*>(info.ptr),
                             (size_t)info.size * (size_t)info.itemsize);
             });
           },
           py::arg("buffer"), py::arg("entry"), py::arg("replica"), py::arg("array"))
      .def_property_readonly("replicas", &Engine::replicas)
      .def(
          "set_distributed",
          [](Engine& e, int offset, int total, py::function exchange) {
            // Called from Engine.run with the GIL released: take it back for
            // the Python exchange (ipuxl.popdist over mpi4py). A Python
            // exception (a timeout, a dead peer) propagates unchanged.
            auto fn = std::make_shared<py::function>(std::move(exchange));
            e.set_distributed(offset, total,
                              [fn](const std::vector<Block>& sends,
                                   const std::vector<Block>& recvs, const std::string& what) {
                                py::gil_scoped_acquire gil;
                                auto list = [](const std::vector<Block>& bs, bool readonly) {
                                  py::list l;
                                  for (const Block& b : bs) {
                                    // A 0-byte message still pairs the instances.
                                    py::object mv = b.bytes
                                        ? py::object(py::memoryview::from_memory(
                                              b.data, (ssize_t)b.bytes, readonly))
                                        : py::object(py::bytearray());
                                    l.append(py::make_tuple(b.peer, mv));
                                  }
                                  return l;
                                };
                                (*fn)(list(sends, true), list(recvs, false), what);
                              });
          },
          py::arg("offset"), py::arg("total"), py::arg("exchange"),
          "Make this engine one instance of several: it holds replicas [offset, offset + "
          "replicas) of `total`; exchange(sends, recvs, what) sends and receives lists of "
          "(peer instance, memoryview) messages and waits for them (ipuxl.popdist."
          "Communicator.exchange_blocks): messages between two instances match in list order.")
      .def(
          "set_distributed_native",
          [](Engine& e, int offset, int total, uintptr_t function, uintptr_t context,
             py::object /*owner*/) {
            // The exchange as a plain C function (ipuxl._mpi_exchange, when
            // built): called from Engine.run without the GIL. It returns
            // non-zero with a message instead of throwing across the C ABI.
            if (!function || !context)
              throw Error("Engine.set_distributed_native: null exchange function or context");
            auto fn = reinterpret_cast<ipuxl_exchange_blocks_fn>(function);
            void* ctx = reinterpret_cast<void*>(context);
            e.set_distributed(offset, total,
                              [fn, ctx](const std::vector<Block>& sends,
                                        const std::vector<Block>& recvs, const std::string& what) {
                                char err[512] = {0};
                                if (fn(ctx, sends.data(), sends.size(), recvs.data(), recvs.size(),
                                       what.c_str(), err, sizeof err) != 0)
                                  throw RunError(err[0] ? std::string(err)
                                                        : what + ": the exchange between "
                                                                 "instances failed");
                              });
          },
          py::arg("offset"), py::arg("total"), py::arg("function"), py::arg("context"),
          py::arg("owner"), py::keep_alive<1, 6>(),
          "set_distributed with a C exchange: function(context, sends, n_sends, recvs, n_recvs, "
          "what, err, err_len) -> 0 or non-zero with a message in err (ipuxl_exchange_blocks_fn "
          "of cpp/exec/exchange_abi.h: ipuxl._mpi_exchange.Exchange's `function` and "
          "`context`); `owner` (which owns the context) is kept alive as long as the engine.")
      .def("program_writes", &Engine::program_writes, py::arg("tensor"))
      .def(
          "bind_external",
          [](Engine& e, int t, py::array& a) {
            auto info = checked_buffer(a, 0, true, "bind_external");
            locked(e, [&] {
              e.bind_external(t, static_cast<uint8_t*>(info.ptr),
                              (size_t)info.size * (size_t)info.itemsize);
            });
          },
          py::arg("tensor"), py::arg("array"), py::keep_alive<1, 3>())
      .def("unbind_external",
           [](Engine& e, int t) { locked(e, [&] { e.unbind_external(t); }); },
           py::arg("tensor"))
      .def(
          "tensor_address",
          [](const Engine& e, int t) {
            if (t < 0 || t >= e.num_tensors()) throw Error("tensor_address: no tensor " + std::to_string(t));
            return locked(e, [&] { return reinterpret_cast<uintptr_t>(e.tensor(t).data); });
          },
          py::arg("tensor"), "Address of a tensor's storage now (for tests and memory reports).")
      .def("tensor_names",
           [](const Engine& e) {
             py::list out;
             for (int i = 0; i < e.num_tensors(); ++i) out.append(e.tensor(i).name);
             return out;
           })
      .def("read_tensor",
           [](const Engine& e, int t, py::array& a, int replica) {
             auto info = checked_buffer(a, 0, true, "read_tensor");
             locked(e, [&] {
               e.read_tensor(t, static_cast<uint8_t*>(info.ptr),
                             (size_t)info.size * (size_t)info.itemsize, replica);
             });
           },
           py::arg("tensor"), py::arg("array"), py::arg("replica") = 0)
      .def("describe", &Engine::describe, py::arg("host") = false,
           "The lowered program: the faithful one (as PopXL would build it) by default, the "
           "one the host runs (after host passes) with host=True.")
      .def("program_counts", &Engine::program_counts, py::arg("host") = false)
      .def("set_profiling", [](Engine& e, bool on) { locked(e, [&] { e.set_profiling(on); }); })
      .def("profile",
           [](const Engine& e) {
             py::list out;
             for (auto& p : locked(e, [&] { return e.profile(); }))
               out.append(py::make_tuple(p.label, p.seconds, p.calls));
             return out;
           })
      .def_property_readonly("arena_bytes", &Engine::arena_bytes)
      .def_property_readonly("unplanned_bytes", &Engine::unplanned_bytes)
      .def_property_readonly("runs", &Engine::runs)
      .def_property_readonly("state_defined", &Engine::state_defined);

  m.def("kernel_names", &KernelRegistry::names);
  m.def("gemm_kernel", []() { return std::string(gemm::kernel_name()); },
        "The core's own float32 GEMM micro-kernel: 'avx512', 'avx2' or 'portable'.");
  m.def("set_sgemm", [](uintptr_t fn) { blas::set_sgemm(reinterpret_cast<void*>(fn)); },
        "Install a cblas_sgemm-compatible function pointer (0 to remove).");
  m.def("num_threads", &num_threads, "Threads the core's kernels use.");
  m.def("set_num_threads", &set_num_threads, "Set the threads the core's kernels use.");
  m.def(
      "set_conv_options",
      [](bool no_winograd, bool no_direct, bool no_tap, bool no_cols, bool no_oc) {
        conv::ConvOptions o;
        o.no_winograd = no_winograd;
        o.no_direct = no_direct;
        o.no_tap = no_tap;
        o.no_cols = no_cols;
        o.no_oc = no_oc;
        conv::set_conv_options(o);
      },
      py::kw_only(), py::arg("no_winograd") = false, py::arg("no_direct") = false,
      py::arg("no_tap") = false, py::arg("no_cols") = false, py::arg("no_oc") = false,
      "Switches of the convolution plan (cpp/kernels/conv/options.hpp), read when a "
      "convolution's kernel is built: each keeps the plan from one form (for comparisons).");
  m.def(
      "conv_options",
      []() {
        const conv::ConvOptions o = conv::conv_options();
        py::dict d;
        d["no_winograd"] = o.no_winograd;
        d["no_direct"] = o.no_direct;
        d["no_tap"] = o.no_tap;
        d["no_cols"] = o.no_cols;
        d["no_oc"] = o.no_oc;
        return d;
      },
      "The convolution plan's switches (set_conv_options), as a dict.");
  m.def("has_blas", []() { return blas::sgemm_ptr() != nullptr; });
  m.def("contention_backoff", &contention_backoff,
        "Whether the core's jobs run on the calling thread alone for now: a recent job's "
        "caller waited long for a preempted worker (other processes keep the CPUs busy).");
  // Test hook for the contention backoff: one job of two chunks whose second
  // chunk, run by a worker, sleeps `sleep_ms` (a worker preempted mid-chunk)
  // while the caller's first chunk spins `caller_ms`, then a job of two
  // chunks and a balanced job of two units. Returns (whether a worker ran
  // the sleeping chunk, contention_backoff() after the first job, how many
  // threads ran the second job, how many the third, the caller's and the
  // worker's chunk of the first job in milliseconds as they took).
  m.def("_test_pool_straggler", [](double sleep_ms, double caller_ms) {
    if (num_threads() < 2) throw Error("_test_pool_straggler: needs 2 or more threads");
    std::atomic<bool> started{false}, on_worker{false};
    std::atomic<double> caller_took{0.0}, worker_took{0.0};
    bool backoff = false;
    std::set<std::thread::id> ran, ran_balanced;
    {
      py::gil_scoped_release nogil;
      // A backoff in progress (this hook's last call, or real contention)
      // would run the job inline: wait it out (it lasts at most 160 ms).
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (contention_backoff() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      const std::thread::id caller = std::this_thread::get_id();
      parallel_for_chunks(2, 2, [&](int64_t b, int64_t) {
        if (b == 0) {
          // The caller's chunk: wait (at most 2 s) until a worker has taken
          // the other, so that the caller cannot take it itself.
          const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
          while (!started.load() && std::chrono::steady_clock::now() < until)
            std::this_thread::yield();
          const auto t0 = std::chrono::steady_clock::now();
          while (std::chrono::steady_clock::now() - t0 <
                 std::chrono::duration<double, std::milli>(caller_ms)) {
          }
          caller_took.store(std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - t0).count());
          return;
        }
        started.store(true);
        if (std::this_thread::get_id() != caller) {
          on_worker.store(true);
          const auto t0 = std::chrono::steady_clock::now();
          std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(sleep_ms));
          worker_took.store(std::chrono::duration<double, std::milli>(
                                std::chrono::steady_clock::now() - t0).count());
        }
      });
      backoff = contention_backoff();
      std::mutex mu;
      auto work = [&](std::set<std::thread::id>& ran) {
        {
          std::lock_guard<std::mutex> lk(mu);
          ran.insert(std::this_thread::get_id());
        }
        // 200 us of work (spun, not slept: a sleep on a VM may last much
        // longer), time for a worker to take the other chunk or piece
        const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
        while (std::chrono::steady_clock::now() < until) {
        }
      };
      parallel_for_chunks(2, 2, [&](int64_t, int64_t) { work(ran); });
      parallel_for_balanced(2, 1, [&](int64_t, int64_t) { work(ran_balanced); });
    }
    return py::make_tuple(on_worker.load(), backoff, (int)ran.size(), (int)ran_balanced.size(),
                          caller_took.load(), worker_took.load());
  }, py::arg("sleep_ms"), py::arg("caller_ms") = 0.0);
  // Test/benchmark hook for the float32 GEMM: C = alpha * op(A) @ op(B) +
  // beta * C on numpy float32 matrices whose rows may be padded (strided
  // views), in place on C. impl: 0 auto, 1 core kernel, 2 installed BLAS,
  // 3 core kernel with B pre-packed once; repeat: back-to-back calls.
  m.def(
      "_test_sgemm",
      [](bool ta, bool tb, float alpha, const py::array& A, const py::array& B, float beta,
         py::array& C, int impl, int64_t repeat) {
        auto view = [](const py::array& a, const char* name, bool writable, int64_t& rows,
                       int64_t& cols, int64_t& ld) {
          if (!a.dtype().is(py::dtype::of<float>()) || a.ndim() != 2)
            throw Error(std::string("_test_sgemm: ") + name + " must be a 2-D float32 array");
          if (writable && !a.writeable())
            throw Error(std::string("_test_sgemm: ") + name + " is read-only");
          rows = a.shape(0);
          cols = a.shape(1);
          const int64_t cs = a.strides(1), rs = a.strides(0);
          if (rows * cols == 0) {
            ld = std::max<int64_t>(cols, 1);
            return;
          }
          if ((cols > 1 && cs != (int64_t)sizeof(float)) || rs % (int64_t)sizeof(float) != 0 ||
              (rows > 1 && rs / (int64_t)sizeof(float) < cols))
            throw Error(std::string("_test_sgemm: ") + name +
                        " must have unit column stride and non-overlapping rows");
          ld = rows > 1 ? rs / (int64_t)sizeof(float) : std::max<int64_t>(cols, 1);
        };
        int64_t ar, ac, lda, br, bc, ldb, cr, cc, ldc;
        view(A, "A", false, ar, ac, lda);
        view(B, "B", false, br, bc, ldb);
        view(C, "C", true, cr, cc, ldc);
        const int64_t M = ta ? ac : ar, K = ta ? ar : ac;
        const int64_t Kb = tb ? bc : br, N = tb ? br : bc;
        if (K != Kb || cr != M || cc != N)
          throw Error("_test_sgemm: shapes of op(A), op(B) and C do not match");
        if (repeat < 1) throw Error("_test_sgemm: repeat must be >= 1");
        const float* pa = static_cast<const float*>(A.data());
        const float* pb = static_cast<const float*>(B.data());
        float* pc = static_cast<float*>(C.mutable_data());
        py::gil_scoped_release release;
        blas::test_sgemm(impl, repeat, ta, tb, M, N, K, alpha, pa, lda, pb, ldb, beta, pc, ldc);
      },
      py::arg("ta"), py::arg("tb"), py::arg("alpha"), py::arg("A"), py::arg("B"),
      py::arg("beta"), py::arg("C"), py::arg("impl") = 0, py::arg("repeat") = 1);

  m.def(
      "ipu_model",
      [](std::shared_ptr<ProgramDesc> d, int main_graph, const py::dict& options) {
        model::Options o = model_options(options);
        model::Report r;
        {
          py::gil_scoped_release release;
          r = model::analyse(*d, main_graph, o);
        }
        return model_report(*d, r);
      },
      py::arg("desc"), py::arg("main_graph"), py::arg("options") = py::dict(),
      "The analytical IPU model of a (faithful) program: tile mapping, memory per tile by "
      "PopVision category, code size, liveness over program steps and cycle estimates.");
  // Instruction-set dispatch (core/isa.hpp) and the GEMM plans (core/blas.hpp).
  m.def("isa", []() { return std::string(isa::level_name(isa::level())); },
        "The instruction-set level the kernels use: the configured one (IPUXL_ISA), else the "
        "best this CPU has.");
  m.def("isa_levels", []() {
        std::vector<std::string> out;
        for (isa::Level l : isa::supported()) out.push_back(isa::level_name(l));
        return out;
      }, "Levels this CPU supports, lowest first (x86: sse, avx2, avx512).");
  m.def("fma_peak", [](const std::string& level, int threads, double seconds) {
        for (isa::Level l : isa::supported())
          if (level == isa::level_name(l)) {
            py::gil_scoped_release release;
            return gemm::fma_peak_gflops((int)l, threads, seconds);
          }
        throw Error("fma_peak: '" + level + "' is not a level this CPU supports");
      }, py::arg("level"), py::arg("threads") = 1, py::arg("seconds") = 0.1,
      "Measured float32 FMA GFLOP/s of a level on `threads` threads at once.");
  m.def("blas_can_be_chosen", &blas::blas_can_be_chosen,
        "Whether the GEMM rules can choose OpenBLAS at the level in use (else it is not loaded).");
  m.def("sgemm_plan", &blas::sgemm_plan_name, py::arg("ta"), py::arg("tb"), py::arg("M"),
        py::arg("N"), py::arg("K"), py::arg("packed") = false,
        "Which float32 GEMM runs this shape ('core' or 'blas'): a fixed rule of the "
        "instruction-set level and the shape (cpp/core/blas.cpp), never a timing.");
}
