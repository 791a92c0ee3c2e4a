"""``scaled_add``: ``a*X + b*Y`` (no broadcasting) and its in-place form."""
import numbers
from typing import Union

import numpy as np

from ..op import create_op
from ..opdef import Cost, define_op
from ..tensor import Tensor
from .rules import like_input
from .utils import NUMERIC_DTYPES, check_dtype_in, check_in_graph, same_tile_set

__all__ = ["scaled_add", "scaled_add_"]


def _scaled_add(kind: str, name: str, out_name: str, X: Tensor, Y: Tensor, a, b,  # noqa: N803
                inplace: bool) -> Tensor:
    tensors = {"X": X, "Y": Y}
    ins = [X, Y, None, None]
    attrs = {}
    for idx, (arg, v) in enumerate((("a", a), ("b", b))):
        if isinstance(v, Tensor):
            tensors[arg] = v
            ins[2 + idx] = v
            attrs[f"scale{idx}"] = 1.0
        elif isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name}: {arg} must be a float or a scalar Tensor, got {v!r}")
        else:
            attrs[f"scale{idx}"] = float(v)
    check_in_graph(name, **tensors)
    same_tile_set(name, *tensors.values())
    for t in tensors.values():
        check_dtype_in(name, t, NUMERIC_DTYPES)
    if X.shape != Y.shape:
        raise ValueError(f"{name}: X {X.id!r} {X.shape} and Y {Y.id!r} {Y.shape} must have the "
                         "same shape (scaled_add does not broadcast)")
    for arg in ("a", "b"):
        s = tensors.get(arg)
        if s is not None and s.nelms != 1:
            raise ValueError(f"{name}: {arg} {s.id!r} must be a scalar (one element), has shape "
                             f"{s.shape}")
    while ins and ins[-1] is None:
        ins.pop()
    return create_op(kind, ins, [out_name], attrs, name=name).outputs[0]


define_op("ScaledAdd", like_input(0), cost="elementwise")
define_op("ScaledAddLhsInplace", like_input(0), aliases=((0, 0),), modifies=(0,),
          no_grad="modifies its input (autodiff rejects modifying ops)", cost=Cost("elementwise", vertex="ScaledAdd"))


def scaled_add(X: Tensor, Y: Tensor, a: Union[float, Tensor] = 1.0,  # noqa: N803
               b: Union[float, Tensor] = 1.0) -> Tensor:
    """``a*X + b*Y`` elementwise.

    ``X`` and ``Y`` must have the same shape (no broadcasting) but may have
    different numeric dtypes; the result has ``X``'s dtype. ``a`` and ``b``
    are floats or single-element Tensors (of any numeric dtype). float16 and
    float32 results compute in float32, others in float64 (integer results
    truncate and saturate).
    """
    return _scaled_add("ScaledAdd", "scaled_add", "scaled_add_out", X, Y, a, b, inplace=False)


def scaled_add_(X: Tensor, Y: Tensor, a: Union[float, Tensor] = 1.0,  # noqa: N803
                b: Union[float, Tensor] = 1.0) -> Tensor:
    """In-place ``scaled_add``: ``X = a*X + b*Y``; returns the updated ``X``."""
    if not isinstance(X, Tensor):
        raise TypeError(f"scaled_add_: X must be a Tensor, got {type(X).__name__}")
    return _scaled_add("ScaledAddLhsInplace", "scaled_add_", f"scaled_add__{X.name}", X, Y, a, b,
                       inplace=True)


# ---- gradient rule
from ..grad import register_grad  # noqa: E402


def _ops():
    from .. import ops as _o  # the full ops namespace, loaded by the time rules run

    return _o


@register_grad("ScaledAdd")
def _scaled_add_grad(ctx):
    """``out = a X + b Y`` (out has X's dtype): dX = a g, dY = b g (cast to
    Y's dtype), and for tensor scales da = sum(g X), db = sum(g Y), reshaped
    and cast to the scale's own shape and dtype."""
    o = _ops()
    g = ctx.g()
    ins = ctx.op.inputs
    scales = []
    for k in (0, 1):
        i = 2 + k
        if len(ins) > i and ins[i] is not None:
            s = ctx.x(i)
            if s.dtype != g.dtype:
                s = o.cast(s, g.dtype)
            scales.append(o.reshape(s, ()) if s.shape != () else s)
        else:
            scales.append(float(ctx.attrs[f"scale{k}"]))
    res = [None] * len(ins)
    for k in (0, 1):
        if not ctx.needs(k):
            continue
        s = scales[k]
        d = g if (not isinstance(s, Tensor) and s == 1.0) else g * s
        want = ins[k].dtype
        res[k] = d if d.dtype == want else o.cast(d, want)
    for k in (0, 1):
        i = 2 + k
        if len(ins) > i and ins[i] is not None and ctx.needs(i):
            v = ctx.x(k)
            if v.dtype != g.dtype:
                v = o.cast(v, g.dtype)
            d = o.sum(g * v)
            if d.shape != ins[i].shape:
                d = o.reshape(d, ins[i].shape)
            res[i] = d if d.dtype == ins[i].dtype else o.cast(d, ins[i].dtype)
    return res
