"""Per-op emission for ``ipuxl export poplar``: convolutions and pooling,
as PopART's ConvOpx / ConvWeightsGradOpx / PoolOpx call PopLibs.

* ``Conv``: ``poplin::convolution`` with a ``poplin::ConvParams`` built
  from the op's pads (input padding), dilations (kernel dilation), strides
  (output stride) and groups; the ONNX weights ``(M, C/g, *k)`` are viewed
  as PopLibs' ``[g][M/g][C/g][*k]``.
* ``ConvDataGrad`` (and ``conv_transpose``): ``poplin::convolution`` of the
  output gradient with ``poplin::getGradientParams`` of the forward
  parameters and ``transposeAndFlipWeights = true``.
* ``ConvWeightsGrad``: ``poplin::calculateWeightDeltas`` with the forward
  parameters.
* ``TopK``: ``popops::topKWithPermutation`` on the axis moved innermost;
  ``Scatter`` (its gradient): ``popops::groupedMultiUpdate`` of a copy.
* ``MaxPool`` / ``AveragePool``: ``popnn::pooling::pool``; their gradients
  ``popnn::pooling::poolInputGradient``.

float8 convolutions have no Poplar element type here and are refused by
:func:`~.poplar_emit.ptype` naming the dtype; pooling with dilations is
refused (``PoolParams`` has no dilation).
"""
__all__ = ["NN_KERNELS"]


def _em():
    from . import poplar_emit

    return poplar_emit


def _dbg(e) -> str:
    return _em().cstr(e.name)


def _ulist(vals) -> str:
    return "{" + ", ".join(f"{int(v)}u" for v in vals) + "}"


def _blist(n: int) -> str:
    return "{" + ", ".join(["false"] * n) + "}"


def _conv_params(em, e, x_shape, w_shape, in_dtype, out_dtype) -> str:
    """A ``poplin::ConvParams`` for a Conv of input ``x_shape`` and ONNX
    weights ``w_shape`` with the op's attributes; returns its C++ name."""
    a = e.attrs
    n = len(x_shape) - 2
    g = int(a["groups"])
    pads = [int(p) for p in a["pads"]]
    ptype = _em().ptype
    zero = _ulist([0] * n)
    name = em.fresh("cp")
    em.line(
        f"poplin::ConvParams {name}({ptype(in_dtype)}, {ptype(out_dtype)}, {int(x_shape[0])}, "
        f"{_ulist(x_shape[2:])}, {_ulist(w_shape[2:])}, {int(x_shape[1]) // g}, {int(w_shape[0]) // g}, {g}, "
        f"poplin::ConvParams::InputTransform({zero}, {zero}, {_ulist([1] * n)}, {_ulist(pads[:n])}, "
        f"{_ulist(pads[n:])}, {_blist(n)}), "
        f"poplin::ConvParams::InputTransform({zero}, {zero}, {_ulist(a['dilations'])}, {zero}, {zero}, "
        f"{_blist(n)}), "
        f"poplin::ConvParams::OutputTransform({zero}, {zero}, {_ulist(a['strides'])}, {zero}, {zero}));")
    return name


def _weights5(em, w_ref: str, w_shape, groups: int) -> str:
    g = int(groups)
    shape = [g, int(w_shape[0]) // g, int(w_shape[1])] + [int(k) for k in w_shape[2:]]
    return f"{w_ref}.reshape({_ulist(shape)})"


def _use_conv(em):
    em.helpers.add("poplinConv")


def _conv(em, e):
    x, w = e.inputs[0], e.inputs[1]
    _use_conv(em)
    p = _conv_params(em, e, x.shape, w.shape, x.dtype, e.outputs[0].dtype)
    em.define(e.outputs[0], f"poplin::convolution(graph, {em.t(x)}, "
                            f"{_weights5(em, em.t(w), w.shape, e.attrs['groups'])}, {p}, false, prog, "
                            f"{_dbg(e)}, {{{{\"pass\", \"TRAINING_FWD\"}}}})")


def _conv_data_grad(em, e):
    dy, w = e.inputs[0], e.inputs[1]
    x_shape = tuple(e.outputs[0].shape)
    _use_conv(em)
    p = _conv_params(em, e, x_shape, w.shape, e.outputs[0].dtype, dy.dtype)
    em.define(e.outputs[0], f"poplin::convolution(graph, {em.t(dy)}, "
                            f"{_weights5(em, em.t(w), w.shape, e.attrs['groups'])}, "
                            f"poplin::getGradientParams({p}), true, prog, {_dbg(e)}, "
                            f"{{{{\"pass\", \"TRAINING_BWD\"}}}})")


def _conv_weights_grad(em, e):
    dy, x = e.inputs[0], e.inputs[1]
    w_shape = tuple(e.outputs[0].shape)
    _use_conv(em)
    p = _conv_params(em, e, x.shape, w_shape, x.dtype, e.outputs[0].dtype)
    em.define(e.outputs[0], f"poplin::calculateWeightDeltas(graph, {em.t(dy)}, {em.t(x)}, {p}, prog, "
                            f"{_dbg(e)}, {{{{\"pass\", \"TRAINING_WU\"}}}})"
                            f".reshape({_ulist(w_shape)})")


# ---------------------------------------------------------------- pooling

def _pool_params(em, e, kind: str, x_shape) -> str:
    """A ``popnn::pooling::PoolParams``; ceil mode's extra windows become
    upper padding (the windows the output shape rule keeps)."""
    a = e.attrs
    n = len(x_shape) - 2
    if any(int(d) != 1 for d in a["dilations"]):
        raise NotImplementedError(f"Poplar export: op {e.type} ({e.name!r}) with dilations "
                                  f"{list(a['dilations'])} (popnn::pooling::PoolParams has no dilation)")
    k, s, pads = [int(v) for v in a["kernel"]], [int(v) for v in a["strides"]], [int(v) for v in a["pads"]]
    lower, upper = pads[:n], list(pads[n:])
    from ..ops.pool import _pool_out

    out = _pool_out(tuple(x_shape[2:]), a)
    for i in range(n):
        # the padding that makes floor((in + pl + pu - k) / s) + 1 the output size
        need = (out[i] - 1) * s[i] + k[i] - x_shape[2 + i] - lower[i]
        if a.get("ceil_mode"):
            upper[i] = need
    ptype = _em().ptype
    name = em.fresh("pp")
    ilist = lambda v: "{" + ", ".join(str(int(t)) for t in v) + "}"  # noqa: E731
    em.line(f"popnn::pooling::PoolParams {name}(popnn::PoolingType::{kind}, {_ulist(x_shape[2:])}, "
            f"{_ulist(k)}, {_ulist(s)}, {ilist(lower)}, {ilist(upper)}, {int(x_shape[1])}, "
            f"{int(x_shape[0])}, {ptype(e.inputs[0].dtype)});")
    em.helpers.add("popnnPooling")
    return name


def _pool(kind: str):
    def emit(em, e):
        x = e.inputs[0]
        p = _pool_params(em, e, kind, x.shape)
        em.define(e.outputs[0], f"popnn::pooling::pool(graph, {p}, {em.t(x)}, prog, {_dbg(e)})")
    return emit


def _max_pool_grad(em, e):
    x, dy = e.inputs[0], e.inputs[1]
    p = _pool_params(em, e, "MAX", x.shape)
    pooled = em.fresh("pooled")
    # PopART's MaxPoolGradOpx passes the forward output; it is recomputed here
    # from the input, as the grad op does not take it.
    em.line(f"poplar::Tensor {pooled} = popnn::pooling::pool(graph, {p}, {em.t(x)}, prog, {_dbg(e)});")
    em.define(e.outputs[0], f"popnn::pooling::poolInputGradient(graph, {p}, {em.t(x)}, {pooled}, "
                            f"{em.t(dy)}, false, prog, {_dbg(e)})")


def _avg_pool_grad(em, e):
    dy = e.inputs[-1]
    x_shape = tuple(e.outputs[0].shape)
    p = _pool_params(em, e, "AVG", x_shape)
    em.define(e.outputs[0], f"popnn::pooling::poolInputGradient(graph, {p}, 1u, {em.t(dy)}, true, prog, "
                            f"{_dbg(e)})")


# ---------------------------------------------------------------- TopK

def _topk(em, e):
    """PopART's TopKOpx: the axis moved innermost,
    ``popops::topKWithPermutation`` (sorted, stable), moved back; the
    UNSIGNED_INT indices cast to the op's int32."""
    x = e.inputs[0]
    a = e.attrs
    rank = len(x.shape)
    axis = int(a["axis"]) % rank
    perm = [d for d in range(rank) if d != axis] + [axis]
    inv = [perm.index(d) for d in range(rank)]
    largest = bool(int(a["largest"]))
    order = "DESCENDING" if largest else "ASCENDING"
    v = em.fresh("topk")
    em.helpers.add("popopsTopK")
    em.line(f"auto {v} = popops::topKWithPermutation(graph, prog, {em.t(x)}.dimShuffle({_ulist(perm)}), "
            f"popops::TopKParams({int(a['k'])}, {str(largest).lower()}, popops::SortOrder::{order}, true), "
            f"{_dbg(e)});")
    em.define(e.outputs[0], f"{v}.first.dimShuffle({_ulist(inv)})")
    em.define(e.outputs[1], f"popops::cast(graph, {v}.second, {_em().ptype(e.outputs[1].dtype)}, prog, "
                            f"{_dbg(e)}).dimShuffle({_ulist(inv)})")


def _scatter(em, e):
    """Scatter (ONNX ScatterElements; PopART's ScatterOpx): a copy of t
    whose region under ``indices`` is updated by
    ``popops::groupedMultiUpdate``, one group per position off the scatter
    axis (the axis moved innermost), each updating single elements."""
    from .poplar_emit import cstr

    t, idx, val = e.inputs
    out = e.outputs[0]
    rank = len(t.shape)
    axis = int(e.attrs["axis"]) % rank
    ishape = list(idx.shape)
    perm = [d for d in range(rank) if d != axis] + [axis]
    groups = 1
    for d in range(rank):
        if d != axis:
            groups *= int(ishape[d])
    m, n = int(ishape[axis]), int(t.shape[axis])
    ref = em.define(out, f"graph.clone({em.t(t)}, {cstr(out.id)})")
    em.line(f"prog.add(poplar::program::Copy({em.t(t)}, {ref}));")
    if groups * m == 0:
        return
    region = ref
    for d in range(rank):
        if d != axis and ishape[d] != t.shape[d]:
            region = f"{region}.slice(0, {int(ishape[d])}, {d})"
    target = f"{region}.dimShuffle({_ulist(perm)}).reshape({_ulist([groups, n, 1])})"
    offs = (f"popops::cast(graph, {em.t(idx)}, poplar::UNSIGNED_INT, prog, {_dbg(e)})"
            f".dimShuffle({_ulist(perm)}).reshape({_ulist([groups, m, 1])})")
    vals = f"{em.t(val)}.dimShuffle({_ulist(perm)}).reshape({_ulist([groups, m, 1, 1])})"
    em.line(f"popops::groupedMultiUpdate(graph, {target}, {vals}, {offs}, {{0}}, {{1}}, prog, "
            f"popops::SlicePlan(), {{}}, {_dbg(e)});")


NN_KERNELS = {
    "Scatter": _scatter,
    "TopK": _topk,
    "Conv": _conv, "ConvDataGrad": _conv_data_grad, "ConvWeightsGrad": _conv_weights_grad,
    "MaxPool": _pool("MAX"), "AveragePool": _pool("AVG"),
    "MaxPoolGrad": _max_pool_grad, "AveragePoolGrad": _avg_pool_grad,
}
