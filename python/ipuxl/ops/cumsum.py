"""``cumsum``: inclusive cumulative sum along one axis, mirroring PopXL."""
from ..op import create_op
from ..tensor import Tensor
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
    op = create_op("CumSum", [t], [(f"{name}_out", t.shape, t.dtype)], {"axis": axis},
                   name=name)
    return op.outputs[0]
