"""PrintTensor, BatchNormInference, Histogram and ReduceMedian for
``ipuxl export poplar``, as PopART's opx classes call Poplar and PopLibs.

* ``PrintTensor``: PopART's PrintTensorOpx, ``program::PrintTensor(title,
  t, PrintTensorFmt)`` with the op's summarise threshold, edge items,
  digits, float format and brackets (Poplar's printer lays the numbers out
  its own way, not as the Session's); the output is a copy of ``t``.
* ``BatchNormInference``: ``y = x a[c] + b[c]`` over channel axis 1 with
  ``a = scale / sqrt(var + epsilon)`` and ``b = bias - mean a`` in float32,
  as the Session (``cpp/kernels/norm.cpp``) folds them; ``popops::map``
  expressions (ipuxl's Poplar has no ``popnn::bn``), within float rounding.
* ``Histogram``: PopART's HistogramOpx, ``popops::histogram`` of the input
  against its levels (rounded to the input's type, as the Session holds
  them), its FLOAT counts cast to uint32; exact.
* ``AllReduce`` (across the IPUs of one replica): output ``i``, on IPU
  ``ipus[i]``, is ``popops::reduceWithOutput`` over the inputs copied to
  that IPU (``poputil::cloneToIpu`` and a ``Copy`` each) and stacked; a mean
  multiplies by ``1/n`` after the sum. The identical-inputs form's forward
  is a copy of each input. The Session accumulates in double and rounds
  once: within float rounding (exact for min, max, and integers).
* ``ReduceMedian``: the reduced axes moved innermost and flattened,
  ``popops::topK`` of the ``(n - 1) / 2 + 1`` smallest, the last of them
  (the lower of the two middle values for even counts, as the Session and
  PopART); a group holding a NaN gives NaN, as the Session. Exact (a data
  element).
"""
import numpy as np

__all__ = ["MISC_KERNELS", "MISC_HELPERS"]

from .poplar_nn import _dbg, _em, _ulist  # noqa: E402  (the emitter's shared small helpers)

_FLOAT_FORMATS = {"auto": "Auto", "fixed": "Fixed", "scientific": "Scientific", "none": "None"}


def _char(c: str) -> str:
    return "'\\''" if c == "'" else ("'\\\\'" if c == "\\" else f"'{c}'")


def _print_tensor(em, e):
    from .poplar_emit import cstr
    from .poplar_ops import _copy_of

    a = e.attrs
    x = em.t(e.inputs[0])
    if a.get("print_self", True):
        fmt = (f"poplar::PrintTensorFmt({int(a['summarise_threshold'])}, {int(a['edge_items'])}, "
               f"{int(a['digits'])}, poplar::PrintTensorFmt::FloatFormat::"
               f"{_FLOAT_FORMATS[a['float_format']]}, {_char(a['separator'])}, {_char(a['open_bracket'])}, "
               f"{_char(a['close_bracket'])})")
        em.line(f"prog.add(poplar::program::PrintTensor({cstr(a['title'])}, {x}, {fmt}, {_dbg(e)}));")
    _copy_of(em, e, x)


def _batch_norm_inference(em, e):
    _em().ptype(e.inputs[0].dtype)
    em.helpers.add("batchNormInference")
    args = ", ".join(em.t(t) for t in e.inputs)
    eps = float(e.attrs["epsilon"])
    em.define(e.outputs[0], f"ipuxl_export::batchNormInference(graph, {args}, {eps!r}, prog, {_dbg(e)})")


def _histogram(em, e):
    from .poplar_emit import cstr

    x = e.inputs[0]
    ptype = _em().ptype(x.dtype)
    levels = np.asarray(e.attrs.get("levels", []), dtype=np.float64).astype(x.dtype.as_numpy())
    lv = em.fresh("levels")
    vals = ", ".join(f"{float(np.float32(v)).hex()}f" for v in levels)
    em.line(f"poplar::Tensor {lv} = graph.addConstant<float>({ptype}, {{{len(levels)}u}}, "
            f"std::vector<float>{{{vals}}}, {cstr(e.name + '/levels')});")
    em.line(f"poputil::mapTensorLinearly(graph, {lv});")
    absolute = str(bool(int(e.attrs.get("absolute_of_input", 0)))).lower()
    em.helpers.add("histogram")
    em.define(e.outputs[0], f"popops::cast(graph, popops::histogram(graph, {em.t(x)}.flatten(), {lv}, {absolute}, "
                            f"prog, {_dbg(e)}), poplar::UNSIGNED_INT, prog, {_dbg(e)})")


def _reduce_median(em, e):
    x, out = e.inputs[0], e.outputs[0]
    rank = len(x.shape)
    axes = sorted({int(a) % rank for a in e.attrs["axes"]}) if rank else []
    n = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    if n == 0:
        raise NotImplementedError(f"Poplar export: op ReduceMedian ({e.name!r}) of an empty group")
    _em().ptype(x.dtype)
    em.helpers.add("reduceMedian")
    em.define(out, f"ipuxl_export::reduceMedian(graph, {em.t(x)}, {_ulist(axes)}, {_ulist(out.shape)}, prog, "
                   f"{_dbg(e)})")


# popops reduction of each collective op code (ops.collectives OP_MAP; 1 is mean)
_POPOPS_REDUCE = {0: "ADD", 1: "ADD", 2: "MUL", 3: "MIN", 4: "MAX", 5: "LOGICAL_AND", 6: "LOGICAL_OR",
                  7: "SQUARE_ADD"}


def _all_reduce_ipus(em, e):
    from .poplar_emit import cstr

    a = e.attrs
    ipus = [int(getattr(t, "_ipu", 0) or 0) for t in e.inputs]  # output i goes on input i's IPU
    code = int(a["op"])
    if code not in _POPOPS_REDUCE:
        raise NotImplementedError(f"Poplar export: op AllReduce ({e.name!r}) with reduction code {code}")
    for i, (t, out) in enumerate(zip(e.inputs, e.outputs)):
        _em().ptype(t.dtype)
        if int(a.get("identical_inputs", 0)):  # PopART's identity forward
            ref = em.define(out, f"poputil::cloneToIpu(graph, {em.t(t)}, {ipus[i]}, {cstr(out.id)})")
            em.line(f"prog.add(poplar::program::Copy({em.t(t)}, {ref}));")
            continue
        parts = []
        for j, s in enumerate(e.inputs):
            if ipus[j] == ipus[i]:
                parts.append(f"{em.t(s)}.expand({{0}})")
                continue
            v = em.fresh("onIpu")
            em.line(f"poplar::Tensor {v} = poputil::cloneToIpu(graph, {em.t(s)}, {ipus[i]}, "
                    f"{cstr(f'{e.name}/in{j}_on_ipu{ipus[i]}')});")
            em.line(f"prog.add(poplar::program::Copy({em.t(s)}, {v}));")
            parts.append(f"{v}.expand({{0}})")
        ref = em.define(out, f"poputil::cloneToIpu(graph, {em.t(t)}, {ipus[i]}, {cstr(out.id)})")
        em.line(f"popops::reduceWithOutput(graph, poplar::concat({{{', '.join(parts)}}}), {ref}, {{0}}, "
                f"popops::ReduceParams(popops::Operation::{_POPOPS_REDUCE[code]}), prog, {_dbg(e)});")
        if code == 1:
            em.line(f"popops::mulInPlace(graph, {ref}, {float(np.float32(1.0 / len(e.inputs))).hex()}f, prog, "
                    f"{_dbg(e)});")


_all_reduce_ipus.whole_graph = True  # its outputs live on several IPUs

MISC_KERNELS = {
    "AllReduce": _all_reduce_ipus,
    "PrintTensor": _print_tensor,
    "BatchNormInference": _batch_norm_inference,
    "Histogram": _histogram,
    "ReduceMedian": _reduce_median,
}

_BATCH_NORM = r"""
// y = x a[c] + b[c] over channel axis 1, a = scale / sqrt(var + eps),
// b = bias - mean a, in float32 (the Session's folding).
static poplar::Tensor batchNormInference(poplar::Graph &graph, const poplar::Tensor &x, const poplar::Tensor &scale,
                                         const poplar::Tensor &bias, const poplar::Tensor &mean,
                                         const poplar::Tensor &var, double eps, poplar::program::Sequence &prog,
                                         const std::string &dbg) {
  namespace pe = popops::expr;
  const auto f = [](const pe::PlaceHolder &p) { return pe::Cast(p, poplar::FLOAT); };
  poplar::Tensor a = popops::map(graph, pe::Divide(f(pe::_1), pe::Sqrt(pe::Add(f(pe::_2), pe::Const(float(eps))))),
                                 {scale, var}, prog, dbg + "/a");
  poplar::Tensor b = popops::map(graph, pe::Sub(f(pe::_1), pe::Mul(f(pe::_2), pe::_3)), {bias, mean, a}, prog,
                                 dbg + "/b");
  std::vector<std::size_t> chan(x.rank(), 1);
  chan[1] = x.dim(1);
  return popops::map(graph, pe::Cast(pe::Add(pe::Mul(f(pe::_1), pe::_2), pe::_3), x.elementType()),
                     {x, broadcastTo(a.reshape(chan), x.shape()), broadcastTo(b.reshape(chan), x.shape())}, prog,
                     dbg + "/normalise");
}
"""

_MEDIAN = r"""
// The lower median over `axes`: the (n - 1) / 2 + 1 smallest by popops::topK,
// the last of them; NaN where the group holds a NaN.
static poplar::Tensor reduceMedian(poplar::Graph &graph, const poplar::Tensor &x, const std::vector<unsigned> &axes,
                                   const std::vector<std::size_t> &outShape, poplar::program::Sequence &prog,
                                   const std::string &dbg) {
  namespace pe = popops::expr;
  std::vector<unsigned> perm;
  for (unsigned d = 0; d < x.rank(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) perm.push_back(d);
  perm.insert(perm.end(), axes.begin(), axes.end());
  std::size_t n = 1;
  for (auto a : axes) n *= x.dim(a);
  const std::size_t rows = x.numElements() / n, k = (n - 1) / 2 + 1;
  poplar::Tensor in = x.dimShuffle(perm).reshape({rows, n});
  poplar::Tensor smallest = popops::topK(graph, prog, in, popops::TopKParams(k, false, popops::SortOrder::ASCENDING),
                                         dbg);
  poplar::Tensor med = smallest.slice(k - 1, k, 1).reshape({rows});
  if (x.elementType().isFloatingPoint()) {
    poplar::Tensor nan = popops::reduce(graph, popops::map(graph, pe::Cast(pe::IsNaN(pe::_1), poplar::FLOAT), {in}, prog,
                                                           dbg + "/isNaN"),
                                        poplar::FLOAT, {1}, popops::ReduceParams(popops::Operation::MAX), prog,
                                        dbg + "/anyNaN");
    popops::mapInPlace(graph, pe::Select(pe::Cast(pe::Const(NAN), x.elementType()), pe::_1,
                                         pe::Gt(pe::_2, pe::Const(0.0f))),
                       {med, nan}, prog, dbg + "/nan");
  }
  return med.reshape(outShape);
}
"""

#: name -> (C++ source, helpers it needs), merged into poplar_codelets.HELPERS.
MISC_HELPERS = {
    "batchNormInference": (_BATCH_NORM, ("broadcastTo",)),
    "histogram": ("", ()),  # headers only (poplar_ops.extra_includes)
    "reduceMedian": (_MEDIAN, ()),
}
