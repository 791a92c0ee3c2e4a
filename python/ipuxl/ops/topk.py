"""``topk``: the k largest or smallest elements along an axis, mirroring PopXL."""
from typing import Optional, Tuple

import numpy as np

from .. import dtypes
from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .utils import NUMERIC_DTYPES, check_dtype_in, check_in_graph, normalize_axis

__all__ = ["topk"]


def topk(t: Tensor, k: int, axis: int, largest: bool, sorted: bool,
         amp: Optional[float] = None) -> Tuple[Tensor, Tensor]:
    """The ``k`` largest (``largest=True``) or smallest elements of ``t``
    along ``axis`` and their int32 indices, as ``(values, indices)``.

    The results are always returned in order (largest first, or smallest
    first), which is also a valid answer for ``sorted=False``. Equal values
    keep ascending index order; NaN counts as larger than every number (as
    ``torch.topk``). ``amp`` is a memory-planning hint of the IPU sort and
    has no effect on results here; it must be None or in (0, 1].
    """
    name = "topk"
    check_in_graph(name, t=t)
    check_dtype_in(name, t, NUMERIC_DTYPES)
    if t.rank == 0:
        raise ValueError(f"{name}: tensor {t.id!r} has rank 0; the input rank must be at least 1")
    ax = normalize_axis(name, axis, t.rank)
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
        raise TypeError(f"{name}: k must be an int, got {k!r}")
    if not 0 <= k <= t.shape[ax]:
        raise ValueError(f"{name}: cannot take top-{k} on axis {axis} of size {t.shape[ax]} "
                         f"(tensor {t.id!r} {t.shape})")
    if amp is not None and not (isinstance(amp, (int, float)) and 0 < amp <= 1):
        raise ValueError(f"{name}: amp (available memory proportion) must be in (0, 1], "
                         f"got {amp!r}")
    op = create_op("TopK", [t], [f"{name}_out_value", f"{name}_out_indices"],
                   {"k": int(k), "axis": ax, "largest": int(bool(largest)),
                    "sorted": int(bool(sorted))}, name=name)
    return op.outputs[0], op.outputs[1]


def _topk_shape(ins, attrs, graphs=()):
    shape = list(ins[0].shape)
    shape[attrs["axis"]] = attrs["k"]
    return [(tuple(shape), ins[0].dtype), (tuple(shape), dtypes.int32)]


define_op("TopK", _topk_shape, cost="sort")


@register_grad("TopK")
def _topk_grad(ctx):
    """The values' gradient goes back to the selected positions (a scatter
    into zeros at the returned indices, which are distinct within a slice);
    the int32 indices output carries none."""
    from .. import ops

    g = ctx.g(0)
    if g is None:
        return [None]
    x = ctx.op.inputs[0]
    zeros = ops.init(x.shape, x.dtype, name="topk_grad_zeros")
    if g.nelms == 0:
        return [zeros]
    return [ops.scatter(zeros, ctx.y(1), g, ctx.attrs["axis"])]
