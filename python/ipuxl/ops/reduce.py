"""Reductions, mirroring PopXL: ``sum``, ``mean``, ``max``, ``min``, ``median``,
``prod``, ``l1``, ``l2``, ``logsum``, ``logsumexp``, ``sumsquare`` (each
``(t, axis=None, keepdims=False)``), plus ``lamb_square`` and ``histogram``.

Common contract of the ``(t, axis, keepdims)`` reductions:

* ``axis`` is an int or a sequence of ints; ``None`` reduces every axis; an
  empty sequence reduces nothing (PopART's ReduceOp); negative axes count
  from the end; repeated or out-of-range axes raise ValueError. A rank-0
  tensor can only be reduced with ``axis=None`` (or ``[]``), which returns it.
* The output keeps the input dtype; ``keepdims=True`` keeps reduced axes with
  size 1.
* float16 and float32 accumulate in double and round once. Integer
  reductions wrap around in two's complement (the result is NumPy's int64
  result cast back to the input dtype); the integer ``mean`` truncates
  toward zero.
* Reducing an empty set of elements follows NumPy where it is defined
  (``sum``/``l1``/``l2``/``sumsquare`` give 0, ``prod`` 1, ``logsum`` and
  ``logsumexp`` -inf, a float ``mean`` NaN); ``max``, ``min``, ``median``
  and an integer ``mean`` of nothing raise ValueError while building.
"""
from typing import Iterable, List, Optional, Tuple, Union

import numpy as np

from .. import dtypes
from ..grad import register_grad
from ..opdef import define_op
from ..op import create_op
from ..tensor import Tensor
from .utils import (FLOAT_DTYPES, NUMERIC_DTYPES, check_dtype_in, check_in_graph,
                    normalize_axes)

__all__ = [
    "sum", "mean", "max", "min", "median", "prod", "l1", "l2", "logsum", "logsumexp",
    "sumsquare", "lamb_square", "histogram",
]

AxisArg = Optional[Union[int, Iterable[int]]]


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def reduce_axes(op: str, t: Tensor, axis: AxisArg) -> Tuple[int, ...]:
    """The sorted, non-negative axes that ``axis`` names for ``t``."""
    if axis is None:
        return tuple(range(t.rank))
    if _is_int(axis):
        axes: List[int] = [int(axis)]
    else:
        try:
            axes = list(axis)
        except TypeError:
            raise TypeError(f"{op}: axis must be None, an int or a sequence of ints, "
                            f"got {axis!r}") from None
        for a in axes:
            if not _is_int(a):
                raise TypeError(f"{op}: axis must be None, an int or a sequence of ints, "
                                f"got {axis!r}")
    if t.rank == 0 and axes:
        raise ValueError(f"{op}: tensor {t.id!r} has rank 0 and no axis {axes[0]} to reduce; "
                         "use axis=None")
    return tuple(sorted(normalize_axes(op, axes, t.rank)))


def _check_keepdims(op: str, keepdims) -> bool:
    if not isinstance(keepdims, (bool, np.bool_)) and keepdims not in (0, 1):
        raise TypeError(f"{op}: keepdims must be a bool, got {keepdims!r}")
    return bool(keepdims)


def reduced_shape(shape: Tuple[int, ...], axes: Tuple[int, ...], keepdims: bool):
    """Output shape of reducing ``axes`` of ``shape``, and the number of
    elements reduced into each output element."""
    out = []
    n_red = 1
    for i, d in enumerate(shape):
        if i in axes:
            n_red *= d
            if keepdims:
                out.append(1)
        else:
            out.append(d)
    return tuple(out), n_red


def _reduce(kind: str, name: str, t: Tensor, axis: AxisArg, keepdims: bool,
            allowed=NUMERIC_DTYPES, empty_ok: bool = True) -> Tensor:
    check_in_graph(name, t=t)
    check_dtype_in(name, t, allowed)
    keepdims = _check_keepdims(name, keepdims)
    axes = reduce_axes(name, t, axis)
    shape, n_red = reduced_shape(t.shape, axes, keepdims)
    n_out = int(np.prod(shape, dtype=np.int64))
    if n_red == 0 and n_out > 0:
        if not empty_ok:
            raise ValueError(f"{name}: cannot reduce tensor {t.id!r} of shape {t.shape} over axes "
                             f"{axes}: they hold no elements and {name} of nothing is undefined")
        if kind == "ReduceMean" and not t.dtype.is_floating_point:
            raise ValueError(f"{name}: the mean of tensor {t.id!r} ({t.dtype.name}) over the empty "
                             f"axes {axes} is NaN, which {t.dtype.name} cannot hold")
    op = create_op(kind, [t], [f"{name}_out"], {"axes": list(axes), "keepdims": int(keepdims)},
                   name=name)
    return op.outputs[0]


def _reduce_shape(ins, attrs, graphs=()):
    return [(reduced_shape(ins[0].shape, tuple(attrs["axes"]), bool(attrs["keepdims"]))[0],
             ins[0].dtype)]


for _t in ("Sum", "Mean", "Max", "Min", "Median", "Prod", "L1", "L2", "LogSum", "LogSumExp",
           "SumSquare"):
    define_op(f"Reduce{_t}", _reduce_shape, cost="reduce")
define_op("LambSquare", lambda ins, attrs, graphs=(): [((), dtypes.float32)], cost="reduce")
define_op("Histogram", lambda ins, attrs, graphs=(): [((len(attrs["levels"]) + 1,),
                                                        dtypes.uint32)],
          no_grad="integer output", cost="reduce")


def sum(t: Tensor, axis: AxisArg = None, keepdims: bool = False) -> Tensor:
    """Sum of the elements of ``t`` over ``axis`` (all axes when None)."""
    return _reduce("ReduceSum", "sum", t, axis, keepdims)


def mean(t: Tensor, axis: AxisArg = None, keepdims: bool = False) -> Tensor:
    """Arithmetic mean over ``axis``; for integers, truncated toward zero."""
    return _reduce("ReduceMean", "mean", t, axis, keepdims)


def max(t: Tensor, axis: AxisArg = None, keepdims: bool = False) -> Tensor:
    """Maximum over ``axis``; NaN propagates (as ``numpy.max``)."""
    return _reduce("ReduceMax", "max", t, axis, keepdims, empty_ok=False)


def min(t: Tensor, axis: AxisArg = None, keepdims: bool = False) -> Tensor:
    """Minimum over ``axis``; NaN propagates (as ``numpy.min``)."""
    return _reduce("ReduceMin", "min", t, axis, keepdims, empty_ok=False)


def median(t: Tensor, axis: AxisArg = None, keepdims: bool = False) -> Tensor:
    """Median over ``axis``. For an even count this is the lower of the two
    middle values (as PopART and ``torch.median``, unlike ``numpy.median``
    which averages them); a group holding NaN gives NaN."""
    return _reduce("ReduceMedian", "median", t, axis, keepdims, empty_ok=False)


def prod(t: Tensor, axis: AxisArg = None, keepdims: bool = False) -> Tensor:
    """Product of the elements over ``axis``."""
    return _reduce("ReduceProd", "prod", t, axis, keepdims)


def l1(t: Tensor, axis: AxisArg = None, keepdims: bool = False) -> Tensor:
    """L1 norm over ``axis``: ``sum(abs(t))``."""
    return _reduce("ReduceL1", "l1", t, axis, keepdims)


def l2(t: Tensor, axis: AxisArg = None, keepdims: bool = False) -> Tensor:
    """L2 norm over ``axis``: ``sqrt(sum(t**2))`` (floating-point only)."""
    return _reduce("ReduceL2", "l2", t, axis, keepdims, allowed=FLOAT_DTYPES)


def logsum(t: Tensor, axis: AxisArg = None, keepdims: bool = False) -> Tensor:
    """``log(sum(t))`` over ``axis`` (floating-point only)."""
    return _reduce("ReduceLogSum", "logsum", t, axis, keepdims, allowed=FLOAT_DTYPES)


def logsumexp(t: Tensor, axis: AxisArg = None, keepdims: bool = False) -> Tensor:
    """``log(sum(exp(t)))`` over ``axis``, computed stably by subtracting the
    maximum first (floating-point only)."""
    return _reduce("ReduceLogSumExp", "logsumexp", t, axis, keepdims, allowed=FLOAT_DTYPES)


def sumsquare(t: Tensor, axis: AxisArg = None, keepdims: bool = False) -> Tensor:
    """Sum of squares over ``axis``: ``sum(t**2)``."""
    return _reduce("ReduceSumSquare", "sumsquare", t, axis, keepdims)


def lamb_square(t: Tensor) -> Tensor:
    """Sum of the squares of every element of ``t`` as a float32 scalar
    (used by the LAMB optimizer); ``t`` is float16 or float32 and is
    accumulated in at least float32."""
    check_in_graph("lamb_square", t=t)
    check_dtype_in("lamb_square", t, FLOAT_DTYPES)
    op = create_op("LambSquare", [t], ["lamb_square_out"], name="lamb_square")
    return op.outputs[0]


def histogram(t: Tensor, levels: List[float], absolute_of_input: bool) -> Tensor:
    """Histogram of every element of ``t`` (float16 or float32) over the bin
    edges ``levels`` (strictly increasing).

    Returns a uint32 tensor of shape ``(len(levels) + 1,)``: entry 0 counts
    ``x < levels[0]``, entry i counts ``levels[i-1] <= x < levels[i]`` and the
    last counts ``x >= levels[-1]`` (NaN lands there too). With
    ``absolute_of_input``, ``abs(x)`` is binned instead. Levels are rounded to
    ``t``'s dtype, as the IPU holds them.
    """
    name = "histogram"
    check_in_graph(name, t=t)
    check_dtype_in(name, t, (dtypes.float16, dtypes.float32))
    try:
        lv = [float(v) for v in levels]
    except (TypeError, ValueError):
        raise TypeError(f"{name}: levels must be a sequence of numbers, got {levels!r}") from None
    if any(not np.isfinite(v) for v in lv):
        raise ValueError(f"{name}: levels must be finite, got {lv}")
    if not all(lv[i] < lv[i + 1] for i in range(len(lv) - 1)):
        raise ValueError(f"{name}: The input levels `{lv}` is not a monotonically increasing "
                         "list.")
    rounded = np.asarray(lv, dtype=t.dtype.as_numpy()) if lv else np.zeros(0)
    if len(np.unique(rounded)) != len(lv):
        raise ValueError(f"{name}: levels {lv} are not distinct once rounded to {t.dtype.name}")
    op = create_op("Histogram", [t], ["histogram_out"],
                   {"levels": lv, "absolute_of_input": int(bool(absolute_of_input))}, name=name)
    return op.outputs[0]


# ---- gradient rules
#
# A reduction's output gradient ``g`` has the output shape. Every rule first
# reshapes it to the keepdims shape (reduced axes kept with size 1), so that
# ordinary broadcasting arithmetic spreads it back over the reduced axes. When
# nothing of the input's shape takes part in the arithmetic (``sum``,
# ``mean``, ``logsum``), the broadcast is made explicit by adding zeros of the
# input shape (there is no expand op; ``g + init(shape)`` is one and stays
# differentiable: the Add rule sums the gradient back down).
#
# Conventions where the derivative is not unique:
# * ``max``/``min``: the gradient is split equally among the elements equal to
#   the result (as ``torch.amax``/``torch.amin``), so each group's gradient
#   sums to ``g``; a group whose result is NaN gets NaN gradients. (PopART's
#   ReduceMaxGrad/ReduceMinGrad give the full ``g`` to every tied element.)
# * ``median``: as PyTorch. Reducing every axis (``torch.median(x)``), the
#   gradient is split equally among the elements equal to the median; reducing
#   some axes (``torch.median(x, dim)``), it goes to a single element equal to
#   the median: ipuxl picks the first in row-major order of the reduced
#   elements (PyTorch's choice among ties is unspecified; on CPU it is also
#   the first for small inputs). A group whose median is NaN gets NaN (all
#   axes) or zero (some axes) gradients.
# * ``prod``: exact for any number of zeros in a group (first order): with no
#   zero ``dx_i = g * prod / x_i``; with exactly one zero only that element gets
#   ``g * (product of the others)``; with two or more zeros the gradient is 0.
#   The second derivative is exact for groups with at most one zero.
# * ``l1``: ``sign(x)`` (0 at 0, as PyTorch); ``l2``: ``x / ||x||``, 0 where the
#   norm is 0 (as PyTorch).

def _grad_ops():
    from .. import ops  # late import: ipuxl.ops imports this module
    return ops


def _keep_shape(ctx) -> Tuple[int, ...]:
    return reduced_shape(ctx.op.inputs[0].shape, tuple(ctx.attrs["axes"]), True)[0]


def _keep(ctx, t: Tensor) -> Tensor:
    """``t`` (shaped like the op's output) reshaped to the keepdims shape."""
    shape = _keep_shape(ctx)
    return t if t.shape == shape else _grad_ops().reshape(t, shape)


def _expand(t: Tensor, shape: Tuple[int, ...]) -> Tensor:
    """``t`` broadcast to exactly ``shape`` (``t + zeros(shape)``)."""
    if t.shape == tuple(shape):
        return t
    return t + _grad_ops().init(shape, t.dtype, name="expand_zeros")


def _n_reduced(ctx) -> int:
    return reduced_shape(ctx.op.inputs[0].shape, tuple(ctx.attrs["axes"]), True)[1]


def _axes_keep(ctx):
    return {"axis": list(ctx.attrs["axes"]), "keepdims": True}


@register_grad("ReduceSum")
def _reduce_sum_grad(ctx):
    return [_expand(_keep(ctx, ctx.g()), ctx.op.inputs[0].shape)]


@register_grad("ReduceMean")
def _reduce_mean_grad(ctx):
    n = _n_reduced(ctx)
    # An empty group has no elements to receive a gradient; avoid 1/0.
    g = _keep(ctx, ctx.g()) * (1.0 / n if n else 0.0)
    return [_expand(g, ctx.op.inputs[0].shape)]


def _extremum_grad(ctx):
    ops = _grad_ops()
    x = ctx.x(0)
    mask = ops.cast(ops.equal(x, _keep(ctx, ctx.y())), x.dtype)
    count = ops.sum(mask, **_axes_keep(ctx))
    return [(_keep(ctx, ctx.g()) / count) * mask]


register_grad("ReduceMax")(_extremum_grad)
register_grad("ReduceMin")(_extremum_grad)


@register_grad("ReduceMedian")
def _reduce_median_grad(ctx):
    ops = _grad_ops()
    from .. import dtypes as _dt

    x = ctx.x(0)
    axes = list(ctx.attrs["axes"])
    if len(axes) == x.rank:
        return _extremum_grad(ctx)
    hit = ops.cast(ops.equal(x, _keep(ctx, ctx.y())), _dt.int32)
    kept = [i for i in range(x.rank) if i not in axes]
    perm = kept + axes
    # Bring the reduced axes last and flatten them into one, so that a cumsum
    # finds the first hit in row-major order of the reduced elements.
    moved = hit if perm == list(range(x.rank)) else ops.transpose(hit, perm)
    lead = moved.shape[:len(kept)]
    flat = moved if len(axes) == 1 else ops.reshape(moved, lead + (_n_reduced(ctx),))
    first = ops.logical_and(ops.equal(flat, 1), ops.equal(ops.cumsum(flat, -1), 1))
    first = ops.cast(first, x.dtype)
    if flat is not moved:
        first = ops.reshape(first, moved.shape)
    if moved is not hit:
        inv = [0] * x.rank
        for i, p in enumerate(perm):
            inv[p] = i
        first = ops.transpose(first, inv)
    return [_keep(ctx, ctx.g()) * first]


@register_grad("ReduceProd")
def _reduce_prod_grad(ctx):
    ops = _grad_ops()
    x = ctx.x(0)
    g = _keep(ctx, ctx.g())
    is_zero = ops.equal(x, 0.0)
    zf = ops.cast(is_zero, x.dtype)
    n_zero = ops.sum(zf, **_axes_keep(ctx))
    x_safe = ops.where(is_zero, 1.0, x)
    p_safe = ops.prod(x_safe, **_axes_keep(ctx))  # product of the non-zero elements
    # The (zero) value of the group's single zero: multiplying by it keeps the
    # derivative of the other elements' gradients with respect to it.
    z = ops.sum(x * zf, **_axes_keep(ctx))
    one_zero = ops.where(is_zero, 1.0, z / x_safe)
    factor = ops.where(ops.equal(n_zero, 0.0), 1.0 / x_safe,
                       ops.where(ops.equal(n_zero, 1.0), one_zero, 0.0))
    return [(g * p_safe) * factor]


@register_grad("ReduceL1")
def _reduce_l1_grad(ctx):
    ops = _grad_ops()
    return [_keep(ctx, ctx.g()) * ops.sign(ctx.x(0))]


@register_grad("ReduceL2")
def _reduce_l2_grad(ctx):
    ops = _grad_ops()
    y = _keep(ctx, ctx.y())
    # Where the norm is 0 every element is 0, so x / 1 gives the zero gradient
    # (as PyTorch) without a 0/0 that would poison second derivatives.
    y_safe = ops.where(ops.equal(y, 0.0), 1.0, y)
    return [(_keep(ctx, ctx.g()) / y_safe) * ctx.x(0)]


@register_grad("ReduceLogSum")
def _reduce_logsum_grad(ctx):
    # d log(s) / dx = 1 / s = 1 / exp(y): reads only the forward output, the
    # tensor PopART's ReduceLogSumGradOp takes (so autodiff stitches the same
    # forward tensors as PopXL).
    s = _grad_ops().exp(_keep(ctx, ctx.y()))
    return [_expand(_keep(ctx, ctx.g()) / s, ctx.op.inputs[0].shape)]


@register_grad("ReduceLogSumExp")
def _reduce_logsumexp_grad(ctx):
    ops = _grad_ops()
    return [_keep(ctx, ctx.g()) * ops.exp(ctx.x(0) - _keep(ctx, ctx.y()))]


@register_grad("ReduceSumSquare")
def _reduce_sumsquare_grad(ctx):
    return [(_keep(ctx, ctx.g()) * 2.0) * ctx.x(0)]


@register_grad("LambSquare")
def _lamb_square_grad(ctx):
    ops = _grad_ops()
    x = ctx.x(0)
    g = ctx.g()  # float32 scalar
    if g.dtype != x.dtype:
        g = ops.cast(g, x.dtype)
    return [(g * 2.0) * x]
