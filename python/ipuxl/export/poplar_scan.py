"""CumSum and ScatterReduce for ``ipuxl export poplar``.

* ``CumSum``: PopLibs has no scan. PopART's CumSumOpx multiplies by a
  triangular matrix of ones (``poplin::matMul``), which rounds the sum
  in the matmul's partials and takes floats only. The export instead
  carries a generated vertex, ``CumSumRows<T>`` in ``codelets.cpp``, that
  keeps the Session's running sum (``cpp/kernels/cumsum.cpp``): a double
  for floats, rounded once per output, and a 64-bit two's-complement sum
  narrowed per output for integers. The axis is moved innermost, the rows
  are spread over the graph's tiles, one vertex per tile.
* ``ScatterReduce``: as PopART's ScatterReduceOpx
  (``scatterreduceutilx.cpp``): the output starts as a copy of the
  initial values, else filled with the reduction's identity (0; 1 for
  ``mul``; the lowest value for ``max``/``min``); then
  ``popops::groupedMultiUpdateAdd`` / ``Max`` / ``Mul`` /
  ``groupedMultiUpdate`` (``none``), one group per position off the axis
  (the axis moved innermost, as Scatter's emission), each updating single
  elements. ``min`` is ``max`` of the negated values, negated back.
  Without initial values, the positions ``max``/``min`` never updated are
  set to 0 by a mask (``multiUpdateMax`` of ones into zeros), as PopART's
  ``maskedFillOutput``. Indices outside ``[0, axis_size)`` (negative ones
  cast to huge unsigned values) are ignored by multiUpdate, as by the
  Session. ``sum``/``mul`` round after every update (the Session keeps a
  double accumulator): the results agree within float rounding, exactly
  for values that sum exactly.
"""
__all__ = ["SCAN_KERNELS", "SCAN_HELPERS", "SCAN_CODELETS"]

from .poplar_nn import _dbg, _em, _ulist  # noqa: E402  (the emitter's shared small helpers)


def _cumsum(em, e):
    x = e.inputs[0]
    _em().ptype(x.dtype)  # float8 / int64 / float64: refused naming the dtype
    em.codelets["CumSumRows"] = SCAN_CODELETS["CumSumRows"]
    em.helpers.add("cumSum")
    em.define(e.outputs[0], f"ipuxl_export::cumSum(graph, {em.t(x)}, {int(e.attrs['axis'])}, "
                            f"prog, {_dbg(e)})")


_UNSIGNED = ("uint8", "uint16", "uint32")


def _scatter_reduce(em, e):
    data, idx = e.inputs[0], e.inputs[1]
    init = e.inputs[2] if len(e.inputs) > 2 else None
    out = e.outputs[0]
    a = e.attrs
    red = a["reduction"]
    if red not in ("sum", "max", "min", "mul", "none"):
        raise NotImplementedError(f"Poplar export: op ScatterReduce ({e.name!r}) reduction {red!r}")
    if red == "min" and data.dtype.name in _UNSIGNED:
        raise NotImplementedError(f"Poplar export: op ScatterReduce ({e.name!r}) 'min' of "
                                  f"{data.dtype.name} (PopART's min negates the values)")
    if data.dtype.name == "bool":
        raise NotImplementedError(f"Poplar export: op ScatterReduce ({e.name!r}) of bool")
    _em().ptype(data.dtype)
    em.helpers.add("scatterReduce")
    if init is not None:
        from .poplar_emit import cstr

        ref = em.define(out, f"graph.clone({em.t(init)}, {cstr(out.id)})")
        em.line(f"prog.add(poplar::program::Copy({em.t(init)}, {ref}));")
    else:
        ref = em.new_variable(out)
    em.line(f"ipuxl_export::scatterReduce(graph, {ref}, {em.t(data)}, {em.t(idx)}, "
            f"{_ulist(a['index_shape'])}, {int(a['axis'])}, {_REDUCTIONS[red]}, "
            f"{str(init is not None).lower()}, prog, {_dbg(e)});")


_REDUCTIONS = {"sum": 0, "max": 1, "min": 2, "mul": 3, "none": 4}

SCAN_KERNELS = {"CumSum": _cumsum, "ScatterReduce": _scatter_reduce}

_CUMSUM = r"""
// Inclusive cumulative sum along `axis` (codelets.cpp's CumSumRows): the
// axis moved innermost, the rows split evenly over the graph's tiles.
static poplar::Tensor cumSum(poplar::Graph &graph, const poplar::Tensor &x, unsigned axis,
                             poplar::program::Sequence &prog, const std::string &dbg) {
  const auto perm = axisLast(x.rank(), axis);
  poplar::Tensor moved = x.dimShuffle(perm);
  poplar::Tensor out = graph.addVariable(x.elementType(), moved.shape(), dbg + "/out");
  const std::size_t n = moved.dim(moved.rank() - 1), rows = n ? moved.numElements() / n : 0;
  if (rows == 0) {
    poputil::mapTensorLinearly(graph, out);
    return out.dimShuffle(inversePerm(perm));
  }
  poplar::Tensor in2 = moved.reshape({rows, n}), out2 = out.reshape({rows, n});
  const std::size_t tiles = graph.getTarget().getNumTiles();
  const std::size_t per = (rows + tiles - 1) / tiles;
  poplar::ComputeSet cs = graph.addComputeSet(dbg);
  const std::string vertex = poputil::templateVertex("CumSumRows", x.elementType());
  for (std::size_t r0 = 0, tile = 0; r0 < rows; r0 += per, ++tile) {
    const std::size_t r1 = std::min(rows, r0 + per);
    graph.setTileMapping(out2.slice(r0, r1, 0), tile);
    poplar::VertexRef v = graph.addVertex(cs, vertex);
    graph.connect(v["in"], in2.slice(r0, r1, 0).flatten());
    graph.connect(v["out"], out2.slice(r0, r1, 0).flatten());
    graph.setInitialValue(v["n"], unsigned(n));
    graph.setTileMapping(v, tile);
  }
  prog.add(poplar::program::Execute(cs));
  return out.dimShuffle(inversePerm(perm));
}
"""

_SCATTER_REDUCE = r"""
// ScatterReduce into `out` (already holding the initial values, or not yet
// written): PopART's ScatterReduceOpx strategies over grouped multiUpdates,
// one group per position off `axis`. reduction: 0 sum, 1 max, 2 min, 3 mul, 4 none.
static void scatterReduce(poplar::Graph &graph, const poplar::Tensor &out, poplar::Tensor data,
                          const poplar::Tensor &indices, const std::vector<std::size_t> &indexShape,
                          unsigned axis, unsigned reduction, bool hasInitial,
                          poplar::program::Sequence &prog, const std::string &dbg) {
  const poplar::Type type = out.elementType();
  const bool isFloat = type == poplar::FLOAT || type == poplar::HALF;
  const double lowest = isFloat ? -INFINITY
                        : type == poplar::INT ? double(std::numeric_limits<int>::min())
                        : type == poplar::SHORT ? double(std::numeric_limits<short>::min())
                        : type == poplar::SIGNED_CHAR ? double(std::numeric_limits<signed char>::min()) : 0.0;
  if (!hasInitial) {
    const double init = reduction == 3 ? 1.0 : (reduction == 1 || reduction == 2) ? lowest : 0.0;
    popops::fill(graph, out, prog, init, dbg + "/init");
  }
  if (data.numElements() == 0) return;
  const auto perm = axisLast(data.rank(), axis);
  const std::size_t n = out.dim(axis), m = data.dim(axis), groups = data.numElements() / m;
  poplar::Tensor idx = broadcastTo(popops::cast(graph, indices, poplar::UNSIGNED_INT, prog, dbg)
                                       .reshape(indexShape), data.shape());
  poplar::Tensor offs = idx.dimShuffle(perm).reshape({groups, m, 1});
  poplar::Tensor target = out.dimShuffle(perm).reshape({groups, n, 1});
  if (reduction == 2) {
    data = popops::neg(graph, data, prog, dbg + "/negUpdate");
    if (hasInitial) popops::negInPlace(graph, out, prog, dbg + "/negTarget");
  }
  poplar::Tensor vals = data.dimShuffle(perm).reshape({groups, m, 1, 1});
  const popops::SlicePlan plan;
  if (reduction == 0) {
    poplar::Tensor one = graph.addConstant<float>(type, {}, 1.0f, dbg + "/one");
    graph.setTileMapping(one, 0);
    popops::groupedMultiUpdateAdd(graph, target, vals, offs, one, {0}, {1}, prog, plan, {}, dbg);
  } else if (reduction == 3) {
    popops::groupedMultiUpdateMul(graph, target, vals, offs, {0}, {1}, prog, plan, {}, dbg);
  } else if (reduction == 4) {
    popops::groupedMultiUpdate(graph, target, vals, offs, {0}, {1}, prog, plan, {}, dbg);
  } else {
    popops::groupedMultiUpdateMax(graph, target, vals, offs, {0}, {1}, prog, plan, {}, dbg);
    if (!hasInitial) {  // positions nothing was scattered to become 0 (PopART's maskedFillOutput)
      poplar::Tensor mask = graph.clone(out, dbg + "/mask");
      popops::zero(graph, mask, prog, dbg + "/zeros");
      poplar::Tensor ones = graph.clone(data, dbg + "/ones");
      popops::fill(graph, ones, prog, 1.0, dbg + "/ones");
      popops::groupedMultiUpdateMax(graph, mask.dimShuffle(perm).reshape({groups, n, 1}),
                                    ones.dimShuffle(perm).reshape({groups, m, 1, 1}), offs, {0}, {1},
                                    prog, plan, {}, dbg + "/mask");
      namespace pe = popops::expr;
      popops::mapInPlace(graph, pe::Select(pe::_1, pe::_2, pe::Cast(pe::_2, poplar::BOOL)), {out, mask},
                         prog, dbg + "/maskedFill");
    }
    if (reduction == 2) popops::negInPlace(graph, out, prog, dbg + "/negTarget");
  }
}
"""

#: name -> (C++ source, helpers it needs), merged into poplar_codelets.HELPERS.
SCAN_HELPERS = {
    "cumSum": (_CUMSUM, ("softmaxAxis",)),
    "scatterReduce": (_SCATTER_REDUCE, ("softmaxAxis", "broadcastTo")),
}

SCAN_CODELETS = {
    "CumSumRows": r"""
// Rows of n elements: out[r][j] = in[r][0] + ... + in[r][j]. Floats keep a
// double running sum rounded once per output; integers a 64-bit
// two's-complement sum narrowed per output (ipuxl's CumSum kernel).
template <typename T> class CumSumRows : public Vertex {
public:
  Input<Vector<T>> in;
  Output<Vector<T>> out;
  unsigned n;

  static void row(const T *x, T *y, unsigned n, std::true_type) {  // float, half
    double s = 0.0;
    for (unsigned j = 0; j < n; ++j) { s += double(float(x[j])); y[j] = T(s); }
  }
  // Integers (every type is at most 32 bits): narrowing through `unsigned`
  // is the sum modulo 2^bits. (An explicit instantiation compiles both
  // overloads for every T, so this one must compile for half too.)
  static void row(const T *x, T *y, unsigned n, std::false_type) {
    unsigned long long s = 0;
    for (unsigned j = 0; j < n; ++j) { s += (unsigned long long)(long long)x[j]; y[j] = T(unsigned(s)); }
  }

  bool compute() {
    using IsFloat = std::integral_constant<bool, std::is_same<T, float>::value || std::is_same<T, half>::value>;
    for (unsigned r = 0; r < out.size(); r += n) row(&in[r], &out[r], n, IsFloat());
    return true;
  }
};
template class CumSumRows<float>;
template class CumSumRows<half>;
template class CumSumRows<int>;
template class CumSumRows<unsigned int>;
template class CumSumRows<short>;
template class CumSumRows<unsigned short>;
template class CumSumRows<signed char>;
template class CumSumRows<unsigned char>;
""",
}
