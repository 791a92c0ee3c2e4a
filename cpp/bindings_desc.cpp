// ProgramDesc's record entry points: add_tensor / add_op, one record a
// call, and add_tensors / add_ops, a list of records in one call (what
// ipuxl.lowering.to_desc uses: pybind11's dispatch of a 32-argument call,
// per op, costs more than the record itself). Both kinds go through the
// same functions, so a batch is checked exactly as its single calls are.
#include "bindings_convert.hpp"

#include <pybind11/stl.h>

namespace ipuxl {

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

int add_tensor_record(ProgramDesc& d, int graph, const std::string& name, int dtype,
                      const Shape& shape, int kind, int ipu, int tile_set) {
  return d.add_tensor(
      graph, name, to_dtype(dtype), shape,
      checked_code<TensorKind>(kind, kNumTensorKinds, name, "tensor kind"),
      Placement{ipu, checked_code<TileSet>(tile_set, kNumTileSets, name, "tile set")});
}

int add_op_record(ProgramDesc& d, int graph, const std::string& type, const std::string& name,
                  std::vector<int> in, std::vector<int> out, const py::dict& attrs,
                  std::vector<int> graphs, std::vector<std::pair<int, int>> aliases,
                  const std::string& kernel, int kind, std::vector<int> modified,
                  bool side_effects, int ipu, int tile_set, int context, int stream,
                  int64_t trip_count, std::vector<std::vector<int>> branch_inputs, bool skip,
                  int cost_class, int remote_buffer, int collective_kind, int reduce_op,
                  std::vector<int> group_of, int exchange_group, const std::string& cost_vertex,
                  const std::vector<int64_t>& cost_header,
                  const std::vector<int64_t>& cost_per_vector,
                  const std::vector<int64_t>& cost_unroll, bool view_streaming_memory,
                  bool write_host_directly, int code_load_graph) {
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
}

namespace {

// Fast conversions of one batch record's fields (CPython's API directly:
// pybind11's casters and dispatch are most of a single call's cost). A
// field of the wrong type is named by its record and position.
struct Fields {
  const char* what;
  size_t record;
  PyObject* const* items;
  Py_ssize_t size;

  [[noreturn]] void bad(int i, const char* expected) const {
    PyErr_Clear();
    throw Error(std::string(what) + ": record " + std::to_string(record) + ", field " +
                std::to_string(i) + ": expected " + expected);
  }
  static long long integer(PyObject* o, const Fields& f, int i) {
    if (!PyLong_Check(o) && !PyIndex_Check(o)) f.bad(i, "an int");
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (x == -1 && PyErr_Occurred())) f.bad(i, "an int");
    return x;
  }
  long long i64(int i) const { return integer(items[i], *this, i); }
  int i32(int i) const {
    const long long x = i64(i);
    if (x < INT32_MIN || x > INT32_MAX) bad(i, "a 32-bit int");
    return (int)x;
  }
  bool flag(int i) const {
    const int t = PyObject_IsTrue(items[i]);
    if (t < 0) bad(i, "a bool");
    return t != 0;
  }
  std::string str(int i) const {
    Py_ssize_t n = 0;
    if (!PyUnicode_Check(items[i])) bad(i, "a str");
    const char* c = PyUnicode_AsUTF8AndSize(items[i], &n);
    if (!c) bad(i, "a str");
    return std::string(c, (size_t)n);
  }
  template <class T>
  std::vector<T> ints(PyObject* o, int i) const {
    py::object seq = py::reinterpret_steal<py::object>(PySequence_Fast(o, ""));
    if (!seq) bad(i, "a sequence of ints");
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
    PyObject** it = PySequence_Fast_ITEMS(seq.ptr());
    std::vector<T> out((size_t)n);
    for (Py_ssize_t k = 0; k < n; ++k) {
      const long long x = integer(it[k], *this, i);
      if (sizeof(T) < sizeof(long long) && (x < INT32_MIN || x > INT32_MAX))
        bad(i, "a sequence of 32-bit ints");
      out[(size_t)k] = (T)x;
    }
    return out;
  }
  std::vector<int> ints(int i) const { return ints<int>(items[i], i); }
  std::vector<int64_t> ints64(int i) const { return ints<int64_t>(items[i], i); }
  std::vector<std::vector<int>> nested(int i) const {
    py::object seq = py::reinterpret_steal<py::object>(PySequence_Fast(items[i], ""));
    if (!seq) bad(i, "a sequence of sequences of ints");
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
    std::vector<std::vector<int>> out;
    out.reserve((size_t)n);
    for (Py_ssize_t k = 0; k < n; ++k)
      out.push_back(ints<int>(PySequence_Fast_GET_ITEM(seq.ptr(), k), i));
    return out;
  }
  std::vector<std::pair<int, int>> pairs(int i) const {
    std::vector<std::pair<int, int>> out;
    for (auto& p : nested(i)) {
      if (p.size() != 2) bad(i, "a sequence of (int, int) pairs");
      out.emplace_back(p[0], p[1]);
    }
    return out;
  }
  py::dict dict(int i) const {
    if (!PyDict_Check(items[i])) bad(i, "a dict");
    return py::reinterpret_borrow<py::dict>(items[i]);
  }
};

// The records of a batch: a list of tuples of `fields` items each.
template <class F>
void for_each_record(const py::list& records, Py_ssize_t fields, const char* what, F&& f) {
  const Py_ssize_t n = PyList_GET_SIZE(records.ptr());
  for (Py_ssize_t r = 0; r < n; ++r) {
    PyObject* t = PyList_GET_ITEM(records.ptr(), r);
    if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != fields)
      throw Error(std::string(what) + ": record " + std::to_string(r) + " is not a tuple of " +
                  std::to_string(fields) + " items");
    f(Fields{what, (size_t)r, &PyTuple_GET_ITEM(t, 0), fields});
  }
}

}  // namespace

int add_tensor_records(ProgramDesc& d, const py::list& records) {
  const int first = (int)d.tensors.size();
  for_each_record(records, 7, "add_tensors", [&](const Fields& f) {
    add_tensor_record(d, f.i32(0), f.str(1), f.i32(2), f.ints64(3), f.i32(4), f.i32(5),
                      f.i32(6));
  });
  return first;
}

void add_op_records(ProgramDesc& d, const py::list& records) {
  for_each_record(records, 32, "add_ops", [&](const Fields& f) {
    add_op_record(d, f.i32(0), f.str(1), f.str(2), f.ints(3), f.ints(4), f.dict(5), f.ints(6),
                  f.pairs(7), f.str(8), f.i32(9), f.ints(10), f.flag(11), f.i32(12), f.i32(13),
                  f.i32(14), f.i32(15), f.i64(16), f.nested(17), f.flag(18), f.i32(19),
                  f.i32(20), f.i32(21), f.i32(22), f.ints(23), f.i32(24), f.str(25), f.ints64(26),
                  f.ints64(27), f.ints64(28), f.flag(29), f.flag(30), f.i32(31));
  });
}

}  // namespace ipuxl
