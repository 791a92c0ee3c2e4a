"""``cumsum``: inclusive cumulative sum along one axis, mirroring PopXL."""
import numpy as np

from ..grad import register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .rules import like_input
from .utils import NUMERIC_DTYPES, check_dtype_in, check_in_graph, normalize_axis

__all__ = ["cumsum"]


def cumsum(t: Tensor, dim: int = 0) -> Tensor:
    """Cumulative sum of ``t`` along ``dim`` (negative counts from the end),
    like ``numpy.cumsum(t, axis=dim)`` but keeping ``t``'s dtype.

    Floats keep a double running sum, rounded once per output; integers wrap
    around in two's complement. ``t`` must have rank >= 1.
    """
    name = "cumsum"
    check_in_graph(name, t=t)
    check_dtype_in(name, t, NUMERIC_DTYPES)
    if t.rank == 0:
        raise ValueError(f"{name}: tensor {t.id!r} has rank 0; the input rank must be at least 1")
    axis = normalize_axis(name, dim, t.rank, "dim")
    op = create_op("CumSum", [t], [f"{name}_out"], {"axis": axis}, name=name)
    return op.outputs[0]


define_op("CumSum", like_input(0), cost="scan")


@register_grad("CumSum")
def _cumsum_grad(ctx):
    """The gradient of an inclusive cumsum is the reverse inclusive cumsum of
    ``g``: flip, cumsum, flip back. The flips are gathers with constant
    reversed indices (exact, unlike ``sum(g) - cumsum(g) + g``)."""
    from .. import ops
    from ..tensor import constant

    g = ctx.g()
    axis = ctx.attrs["axis"]
    n = g.shape[axis]
    if n <= 1:
        return [g]
    rev = constant(np.arange(n - 1, -1, -1, dtype=np.int32), name="cumsum_reverse")
    flipped = ops.gather(g, rev, axis)
    return [ops.gather(ops.cumsum(flipped, axis), rev, axis)]
