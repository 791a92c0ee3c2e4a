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
#include "bindings_convert.hpp"

namespace py = pybind11;

namespace ipuxl {
void bind_options(py::module_& m);  // bindings_options.cpp
void bind_runtime(py::module_& m);  // bindings_runtime.cpp
}
using namespace ipuxl;

namespace {

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
  py::list pk;
  for (const auto& e : r.peak_live) {
    py::dict x;
    x["tensor"] = e.tensor >= 0 ? py::object(py::str(d.tensors[e.tensor].name)) : py::object(py::none());
    x["shape"] = e.tensor >= 0 ? py::object(py::tuple(py::cast(d.tensors[e.tensor].shape))) : py::object(py::none());
    x["op"] = e.op >= 0 ? py::object(py::str(d.ops[e.op].name)) : py::object(py::none());
    x["graph"] = d.graphs[e.graph].name;
    x["bytes"] = e.bytes;
    pk.append(x);
  }
  out["peak_live"] = pk;
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
            return add_tensor_record(d, graph, name, dtype, shape, kind, ipu, tile_set);
          },
          py::arg("graph"), py::arg("name"), py::arg("dtype"), py::arg("shape"), py::arg("kind"),
          py::arg("ipu") = 0, py::arg("tile_set") = 0)
      .def("add_tensors", &add_tensor_records, py::arg("records"),
           "add_tensor for each tuple of its 7 positional arguments in `records`; returns "
           "the first one's index (the rest follow in order).")
      .def("add_ops", &add_op_records, py::arg("records"),
           "add_op for each tuple of its 32 positional arguments in `records`, in order.")
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
            return add_op_record(d, graph, type, name, std::move(in), std::move(out), attrs,
                                 std::move(graphs), std::move(aliases), kernel, kind,
                                 std::move(modified), side_effects, ipu, tile_set, context, stream,
                                 trip_count, std::move(branch_inputs), skip, cost_class,
                                 remote_buffer, collective_kind, reduce_op, std::move(group_of),
                                 exchange_group, cost_vertex, cost_header, cost_per_vector,
                                 cost_unroll, view_streaming_memory, write_host_directly,
                                 code_load_graph);
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

  bind_runtime(m);

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
}
