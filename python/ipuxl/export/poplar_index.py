"""Gather, arg-extrema, one-hot, IncrementMod and the norm-like reductions
for ``ipuxl export poplar``, as PopART's opx classes call PopLibs.

* ``Gather`` / ``TiedGather``: PopART's GatherOpx, ``popops::multiSlice``
  of the data with the gather axis moved outermost, one slice per index.
  The indices are first brought to the Session's rules
  (``cpp/kernels/gather.cpp``) by a ``popops::map``: with ``zero_OOR`` an
  index outside ``[0, n)`` gathers index 0 and its slice is then zeroed
  (a ``Select`` against a broadcast validity mask, as PopART zeroes
  out-of-range rows); without it, ``[-n, 0)`` counts from the end and the
  rest is clamped into ``[0, n)``. The results are the data's own
  elements, so they are bit-identical to the Session's.
* ``ArgMax`` / ``ArgMin``: PopART's ArgExtremaOpx, ``popnn::argMax`` /
  ``popnn::argMin`` of the input with the axis moved innermost and viewed
  as ``[rows, n]``, the UNSIGNED_INT result cast to the op's int32. Ties
  give the first index in both. A NaN is skipped by popnn's comparison
  (unless it is the only candidate), while the Session takes the first NaN
  (NumPy): the two differ on rows that hold a NaN; PopXL leaves that case
  unspecified.
* ``Onehot``: PopART's OnehotOpx, ``popops::encodeOneHot`` of the
  flattened indices into ``[n, depth]`` with the values' off/on elements,
  the new axis moved to its place. Negative indices in ``[-depth, 0)``
  first get ``depth`` added (ONNX, as the Session); float indices are
  truncated, non-finite ones give an all-"off" row, as the Session.
* ``IncrementMod`` (and in place): PopART's IncrementModOpx, the
  ``popops::map`` expression ``Rem(Add(_1, increment), modulus)``. The
  sum is formed in the tensor's type (an int32 sum past 2^31 wraps, where
  the Session forms it in 64 bits; float16 rounds the sum before the
  remainder, where the Session keeps it in float).
* ``SparseAccumulate``: PopART's SparseAccumulateOpx, ``popops::multiUpdateAdd``
  of the update's slices (the gather-gradient layout, the indices' axes
  moved outermost) into the accumulator with the axis outermost, scaled by
  the factor (1 for ``add``). Indices outside ``[0, n)`` (negative ones
  read as huge unsigned values) are skipped, as by the Session. Each update
  rounds once, as the Session's.
* ``ReduceL1`` / ``ReduceL2`` / ``ReduceLogSum`` / ``ReduceLogSumExp``:
  PopART's ReduceL1Opx (``popops::reduce`` ADD of ``abs``), ReduceL2Opx
  (SQUARE_ADD, then ``sqrt``), ReduceLogSumOpx (ADD, then ``log``) and
  ReduceLogSumExpOpx (the maximum subtracted before ``exp``, ADD, ``log``,
  the maximum added back). An infinite maximum is replaced by 0 before the
  subtraction, so that all ``-inf`` gives ``-inf`` and any ``+inf`` gives
  ``+inf``, as the Session. The Session accumulates in double and rounds
  once; these round the reduction and each map: within float rounding.
"""
import numpy as np

__all__ = ["INDEX_KERNELS", "INDEX_HELPERS"]

from .poplar_nn import _dbg, _em, _ulist  # noqa: E402  (the emitter's shared small helpers)

_SIGNED = ("int8", "int16", "int32")
_UNSIGNED = ("uint8", "uint16", "uint32")


def _index_kind(e, t) -> str:
    name = t.dtype.name
    if name in _SIGNED:
        return "true"
    if name in _UNSIGNED:
        return "false"
    raise NotImplementedError(f"Poplar export: op {e.type} ({e.name!r}) with {name} indices "
                              f"(supported: {', '.join(_SIGNED + _UNSIGNED)})")


def _gather(em, e):
    t, idx = e.inputs[0], e.inputs[1]
    axis = int(e.attrs["axis"])
    _em().ptype(t.dtype)
    signed = _index_kind(e, idx)
    if t.shape[axis] == 0 and idx.nelms > 0:
        raise NotImplementedError(f"Poplar export: op {e.type} ({e.name!r}) gathers from the empty "
                                  f"axis {axis} of {t.id!r}")
    em.helpers.add("gatherAxis")
    zero = str(bool(e.attrs.get("zero_oor", False))).lower()
    em.define(e.outputs[0], f"ipuxl_export::gatherAxis(graph, {em.t(t)}, {em.t(idx)}, {axis}, {signed}, "
                            f"{zero}, prog, {_dbg(e)})")


def _arg_extreme(is_min: bool):
    def emit(em, e):
        x = e.inputs[0]
        axis = int(e.attrs["axis"]) % len(x.shape)
        em.helpers.add("argExtreme")
        em.define(e.outputs[0], f"ipuxl_export::argExtreme(graph, {em.t(x)}, {axis}, {str(is_min).lower()}, "
                                f"{_ulist(e.outputs[0].shape)}, prog, {_dbg(e)})")
    return emit


def _onehot(em, e):
    idx, values = e.inputs[0], e.inputs[2]
    out = e.outputs[0]
    _em().ptype(out.dtype)
    name = idx.dtype.name
    if name in _SIGNED + _UNSIGNED:
        kind = 0 if name in _SIGNED else 1
    elif name in ("float32", "float16"):
        kind = 2
    else:
        raise NotImplementedError(f"Poplar export: op Onehot ({e.name!r}) with {name} indices")
    em.helpers.add("oneHotAxis")
    em.define(out, f"ipuxl_export::oneHotAxis(graph, {em.t(idx)}, {em.t(values)}, "
                   f"{int(e.attrs['depth'])}, {int(e.attrs['axis'])}, {kind}, prog, {_dbg(e)})")


def _increment_mod(em, e):
    x = e.inputs[0]
    _em().ptype(x.dtype)  # refuses the types Poplar lacks, naming the dtype
    inc, mod = float(e.attrs["increment"]), float(e.attrs["modulus"])
    if x.dtype.is_int:  # PopART casts both to the tensor's type, truncating
        ctype = "int" if x.dtype.name in _SIGNED else "unsigned"
        inc_c, mod_c = (f"{ctype}({int(np.trunc(v))})" for v in (inc, mod))
    else:
        inc_c, mod_c = (f"{float(np.float32(v)).hex()}f" for v in (inc, mod))
    expr = (f"popops::expr::Rem(popops::expr::Add(popops::expr::_1, popops::expr::Const({inc_c})), "
            f"popops::expr::Const({mod_c}))")
    if e.modified:  # the in-place form
        em.line(f"popops::mapInPlace(graph, {expr}, {{{em.t(x)}}}, prog, {_dbg(e)});")
        em.alias(e.outputs[0], x)
    else:
        em.define(e.outputs[0], f"popops::map(graph, {expr}, {{{em.t(x)}}}, prog, {_dbg(e)})")


def _norm_reduce(kind: int):
    """ReduceL1 (0), ReduceL2 (1), ReduceLogSum (2), ReduceLogSumExp (3)."""
    def emit(em, e):
        x, out = e.inputs[0], e.outputs[0]
        rank = len(x.shape)
        axes = sorted({int(a) % rank for a in e.attrs["axes"]}) if rank else []
        _em().ptype(x.dtype)
        em.helpers.add("normReduce")
        em.define(out, f"ipuxl_export::normReduce(graph, {em.t(x)}, {_ulist(axes)}, {kind}, "
                       f"{_ulist(out.shape)}, prog, {_dbg(e)})")
    return emit


def _sparse_accumulate(em, e):
    t, x = e.inputs[0], e.inputs[1]
    f, idx = e.inputs[2], e.inputs[3]  # f: None for a constant factor
    _em().ptype(t.dtype)
    _index_kind(e, idx)
    em.helpers.add("sparseAccumulate")
    if e.attrs["mode"] == "add":
        factor = "1.0"
    elif f is not None:
        factor = "NAN"  # read from the tensor below
    else:
        factor = repr(float(np.float32(e.attrs.get("factor", 1.0))))
    ftensor = em.t(f) if f is not None and e.attrs["mode"] != "add" else "poplar::Tensor()"
    em.line(f"ipuxl_export::sparseAccumulate(graph, {em.t(t)}, {em.t(x)}, {em.t(idx)}, "
            f"{int(e.attrs['axis'])}, {factor}, {ftensor}, prog, {_dbg(e)});")
    em.alias(e.outputs[0], t)


INDEX_KERNELS = {
    "SparseAccumulate": _sparse_accumulate,
    "Gather": _gather, "TiedGather": _gather,
    "ArgMax": _arg_extreme(False), "ArgMin": _arg_extreme(True),
    "Onehot": _onehot,
    "IncrementMod": _increment_mod, "IncrementModInplace": _increment_mod,
    "ReduceL1": _norm_reduce(0), "ReduceL2": _norm_reduce(1), "ReduceLogSum": _norm_reduce(2),
    "ReduceLogSumExp": _norm_reduce(3),
}

_GATHER = r"""
// Gather along `axis` (PopART's GatherOpx: popops::multiSlice with the axis
// outermost), the indices first brought to the Session's rules.
static poplar::Tensor gatherAxis(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &indices,
                                 unsigned axis, bool signedIndices, bool zeroOOR,
                                 poplar::program::Sequence &prog, const std::string &dbg) {
  namespace pe = popops::expr;
  const std::size_t n = t.dim(axis), k = indices.numElements();
  const std::vector<std::size_t> ts = t.shape(), is = indices.shape();
  std::vector<std::size_t> outShape(ts.begin(), ts.begin() + axis);
  outShape.insert(outShape.end(), is.begin(), is.end());
  outShape.insert(outShape.end(), ts.begin() + axis + 1, ts.end());
  std::vector<unsigned> perm{axis};
  for (unsigned d = 0; d < t.rank(); ++d)
    if (d != axis) perm.push_back(d);
  poplar::Tensor moved = t.dimShuffle(perm);  // [n, outer..., inner...]
  if (k == 0 || t.numElements() == 0) {
    poplar::Tensor out = graph.addVariable(t.elementType(), outShape, dbg + "/out");
    poputil::mapTensorLinearly(graph, out);
    if (out.numElements()) popops::zero(graph, out, prog, dbg + "/zero");
    return out;
  }
  poplar::Tensor i = popops::cast(graph, indices.flatten(), signedIndices ? poplar::INT : poplar::UNSIGNED_INT,
                                  prog, dbg + "/indices");
  poplar::Tensor valid;
  if (signedIndices) {
    const int last = int(n) - 1;
    if (zeroOOR) {
      valid = popops::map(graph, pe::And(pe::Gte(pe::_1, pe::Const(0)), pe::Lt(pe::_1, pe::Const(int(n)))), {i}, prog,
                          dbg + "/valid");
      i = popops::map(graph, pe::Select(pe::_1, pe::Const(0), pe::_2), {i, valid}, prog, dbg + "/inRange");
    } else {
      i = popops::map(graph, pe::Clamp(pe::Select(pe::Add(pe::_1, pe::Const(int(n))), pe::_1, pe::Lt(pe::_1, pe::Const(0))),
                                       pe::Const(0), pe::Const(last)), {i}, prog, dbg + "/wrapClamp");
    }
    i = popops::cast(graph, i, poplar::UNSIGNED_INT, prog, dbg + "/unsigned");
  } else if (zeroOOR) {
    valid = popops::map(graph, pe::Lt(pe::_1, pe::Const(unsigned(n))), {i}, prog, dbg + "/valid");
    i = popops::map(graph, pe::Select(pe::_1, pe::Const(0u), pe::_2), {i, valid}, prog, dbg + "/inRange");
  } else {
    i = popops::map(graph, pe::Min(pe::_1, pe::Const(unsigned(n - 1))), {i}, prog, dbg + "/clamp");
  }
  poplar::Tensor rows = popops::multiSlice(graph, moved, i.reshape({k, 1}), {0}, {1}, prog, popops::SlicePlan(), {},
                                           dbg);  // [k, 1, outer..., inner...]
  const std::size_t restElems = t.numElements() / n;
  if (zeroOOR) {
    poplar::Tensor flat = rows.reshape({k, restElems});
    poplar::Tensor zeros = graph.addConstant<float>(t.elementType(), {}, 0.0f, dbg + "/zeros");
    graph.setTileMapping(zeros, 0);
    rows = popops::map(graph, pe::Select(pe::_1, pe::_2, pe::_3),
                       {flat, zeros.reshape({1, 1}).broadcast(k, 0).broadcast(restElems, 1),
                        valid.reshape({k, 1}).broadcast(restElems, 1)}, prog, dbg + "/zeroOOR");
  }
  // [indices..., outer..., inner...] -> [outer..., indices..., inner...]
  std::vector<std::size_t> front(is.begin(), is.end());
  const std::vector<std::size_t> ms = moved.shape();
  front.insert(front.end(), ms.begin() + 1, ms.end());
  poplar::Tensor r = rows.reshape(front);
  const unsigned ri = indices.rank(), outer = axis, inner = t.rank() - axis - 1;
  std::vector<unsigned> back;
  for (unsigned d = 0; d < outer; ++d) back.push_back(ri + d);
  for (unsigned d = 0; d < ri; ++d) back.push_back(d);
  for (unsigned d = 0; d < inner; ++d) back.push_back(ri + outer + d);
  return r.dimShuffle(back).reshape(outShape);
}
"""

_ARG = r"""
// ArgMax / ArgMin along `axis` (PopART's ArgExtremaOpx: popnn::argMax /
// argMin over [rows, n] with the axis innermost), as int32 of outShape.
static poplar::Tensor argExtreme(poplar::Graph &graph, const poplar::Tensor &x, unsigned axis, bool isMin,
                                 const std::vector<std::size_t> &outShape, poplar::program::Sequence &prog,
                                 const std::string &dbg) {
  poplar::Tensor moved = x.dimShuffle(axisLast(x.rank(), axis));
  const std::size_t n = moved.dim(moved.rank() - 1), rows = x.numElements() / n;
  poplar::Tensor in = moved.reshape({rows, n});
  poplar::Tensor idx = isMin ? popnn::argMin(graph, in, prog, dbg) : popnn::argMax(graph, in, prog, dbg);
  return popops::cast(graph, idx, poplar::INT, prog, dbg + "/cast").reshape(outShape);
}
"""

_ONEHOT = r"""
// One-hot of `indices` with a new axis of `depth` at `axis` (PopART's
// OnehotOpx: popops::encodeOneHot with values' [off, on]). kind: 0 signed,
// 1 unsigned, 2 float indices (truncated; non-finite: all off).
static poplar::Tensor oneHotAxis(poplar::Graph &graph, const poplar::Tensor &indices, const poplar::Tensor &values,
                                 unsigned depth, unsigned axis, int kind, poplar::program::Sequence &prog,
                                 const std::string &dbg) {
  namespace pe = popops::expr;
  const std::size_t n = indices.numElements();
  std::vector<std::size_t> shape = indices.shape();
  shape.push_back(depth);
  poplar::Tensor encoded = graph.addVariable(values.elementType(), {n, depth}, dbg + "/encoded");
  poputil::mapTensorLinearly(graph, encoded);
  if (n == 0) return encoded.reshape(shape).dimShuffle(moveLastTo(shape.size(), axis));
  poplar::Tensor i = indices.flatten();
  if (kind == 2) {  // finite and within int range: truncated; else past the end (all off)
    i = popops::map(graph, pe::Select(pe::Cast(pe::_1, poplar::INT), pe::Const(int(depth)),
                                      pe::And(pe::IsFinite(pe::_1), pe::Lt(pe::Abs(pe::Cast(pe::_1, poplar::FLOAT)),
                                                                           pe::Const(2147483520.0f)))),
                    {i}, prog, dbg + "/truncate");
  } else {
    i = popops::cast(graph, i, kind == 1 ? poplar::UNSIGNED_INT : poplar::INT, prog, dbg + "/indices");
  }
  if (kind != 1)  // [-depth, 0) counts from the end (ONNX)
    i = popops::map(graph, pe::Select(pe::Add(pe::_1, pe::Const(int(depth))), pe::_1, pe::Lt(pe::_1, pe::Const(0))), {i},
                    prog, dbg + "/wrap");
  popops::encodeOneHot(graph, i, encoded, prog, values[1], values[0], dbg);
  return encoded.reshape(shape).dimShuffle(moveLastTo(shape.size(), axis));
}
"""

_NORM = r"""
// ReduceL1 (0), ReduceL2 (1), ReduceLogSum (2), ReduceLogSumExp (3) over
// `axes`, as PopART's opx classes compose popops::reduce and maps.
static poplar::Tensor normReduce(poplar::Graph &graph, const poplar::Tensor &x, const std::vector<std::size_t> &axes,
                                 int kind, const std::vector<std::size_t> &outShape, poplar::program::Sequence &prog,
                                 const std::string &dbg) {
  namespace pe = popops::expr;
  const poplar::Type type = x.elementType();
  auto reduce = [&](const poplar::Tensor &t, popops::Operation op, const std::string &what) {
    return popops::reduce(graph, t, type, axes, popops::ReduceParams(op), prog, dbg + what);
  };
  if (kind == 0) return reduce(popops::abs(graph, x, prog, dbg + "/abs"), popops::Operation::ADD, "").reshape(outShape);
  if (kind == 1) {
    poplar::Tensor s = reduce(x, popops::Operation::SQUARE_ADD, "");
    popops::sqrtInPlace(graph, s, prog, dbg + "/sqrt");
    return s.reshape(outShape);
  }
  if (kind == 2) {
    poplar::Tensor s = reduce(x, popops::Operation::ADD, "");
    popops::logInPlace(graph, s, prog, dbg + "/log");
    return s.reshape(outShape);
  }
  // log-sum-exp: m = max (0 where infinite), m + log(sum(exp(x - m)))
  std::vector<std::size_t> keep = x.shape();
  for (auto a : axes) keep[a] = 1;
  poplar::Tensor m = reduce(x, popops::Operation::MAX, "/max").reshape(keep);
  popops::mapInPlace(graph, pe::Select(pe::_1, pe::Const(0.0f), pe::IsFinite(pe::_1)), {m}, prog, dbg + "/finiteMax");
  poplar::Tensor shifted = popops::map(graph, pe::Exp(pe::Sub(pe::_1, pe::_2)), {x, broadcastTo(m, x.shape())}, prog,
                                       dbg + "/exp");
  poplar::Tensor s = reduce(shifted, popops::Operation::ADD, "/sum").reshape(keep);
  popops::mapInPlace(graph, pe::Add(pe::Log(pe::_1), pe::_2), {s, m}, prog, dbg + "/log");
  return s.reshape(outShape);
}
"""

_SPARSE_ACCUMULATE = r"""
// t[.., indices[k], ..] += factor * x[.., k, ..] along `axis` (PopART's
// SparseAccumulateOpx: popops::multiUpdateAdd, the axis outermost); the
// factor is `factorTensor` when it is valid, else `factor`.
static void sparseAccumulate(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &x,
                             const poplar::Tensor &indices, unsigned axis, double factor,
                             const poplar::Tensor &factorTensor, poplar::program::Sequence &prog,
                             const std::string &dbg) {
  const std::size_t k = indices.numElements();
  if (k == 0 || t.numElements() == 0) return;
  std::vector<unsigned> front{axis};
  for (unsigned d = 0; d < t.rank(); ++d)
    if (d != axis) front.push_back(d);
  poplar::Tensor target = t.dimShuffle(front);  // [n, rest...]
  // x: t.shape[:axis] + indices.shape + t.shape[axis+1:] -> [k, 1, rest...]
  const unsigned ri = indices.rank();
  std::vector<unsigned> xfront;
  for (unsigned d = 0; d < ri; ++d) xfront.push_back(axis + d);
  for (unsigned d = 0; d < axis; ++d) xfront.push_back(d);
  for (unsigned d = axis + ri; d < x.rank(); ++d) xfront.push_back(d);
  std::vector<std::size_t> sshape{k, 1};
  const std::vector<std::size_t> ts = target.shape();
  sshape.insert(sshape.end(), ts.begin() + 1, ts.end());
  poplar::Tensor s = x.dimShuffle(xfront).reshape(sshape);
  poplar::Tensor offs = popops::cast(graph, indices.flatten(), poplar::UNSIGNED_INT, prog, dbg + "/indices")
                            .reshape({k, 1});
  poplar::Tensor scale = factorTensor.valid()
                             ? factorTensor.reshape({})
                             : graph.addConstant<float>(poplar::FLOAT, {}, float(factor), dbg + "/factor");
  if (!factorTensor.valid()) graph.setTileMapping(scale, 0);
  popops::multiUpdateAdd(graph, target, s, offs, scale, {0}, {1}, prog, popops::SlicePlan(), {}, dbg);
}
"""

_MOVE_LAST_TO = r"""
// The permutation that moves the last of `rank` dimensions to `pos`.
static std::vector<unsigned> moveLastTo(unsigned rank, unsigned pos) {
  std::vector<unsigned> p;
  for (unsigned d = 0; d + 1 < rank; ++d) {
    if (d == pos) p.push_back(rank - 1);
    p.push_back(d);
  }
  if (pos == rank - 1) p.push_back(rank - 1);
  return p;
}
"""

#: name -> (C++ source, helpers it needs), merged into poplar_codelets.HELPERS.
INDEX_HELPERS = {
    "gatherAxis": (_GATHER, ()),
    "argExtreme": (_ARG, ("softmaxAxis",)),
    "moveLastTo": (_MOVE_LAST_TO, ()),
    "oneHotAxis": (_ONEHOT, ("moveLastTo",)),
    "normReduce": (_NORM, ("broadcastTo",)),
    "sparseAccumulate": (_SPARSE_ACCUMULATE, ()),
}
