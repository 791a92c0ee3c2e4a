"""``argmax`` and ``argmin`` along one axis, mirroring PopXL.

The result is int32 (PopART's ArgMax/ArgMin). Ties give the first index and
a NaN counts as the extreme value (as NumPy), so a slice holding NaN yields
the index of its first NaN.
"""
import numpy as np

from .. import dtypes
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .reduce import reduced_shape
from .utils import NUMERIC_DTYPES, check_dtype_in, check_in_graph, normalize_axis

__all__ = ["argmax", "argmin"]


def _arg(kind: str, name: str, t: Tensor, dim: int, keepdim: bool) -> Tensor:
    check_in_graph(name, t=t)
    check_dtype_in(name, t, NUMERIC_DTYPES)
    if t.rank == 0:
        raise ValueError(f"{name}: tensor {t.id!r} has rank 0; the input rank must be at least 1")
    if not isinstance(keepdim, (bool, np.bool_)) and keepdim not in (0, 1):
        raise TypeError(f"{name}: keepdim must be a bool, got {keepdim!r}")
    axis = normalize_axis(name, dim, t.rank, "dim")
    shape, n_red = reduced_shape(t.shape, (axis,), bool(keepdim))
    if n_red == 0 and int(np.prod(shape, dtype=np.int64)) > 0:
        raise ValueError(f"{name}: dimension {dim} of tensor {t.id!r} {t.shape} is empty; "
                         f"{name} of an empty sequence is undefined")
    op = create_op(kind, [t], [f"{name}_out"], {"axis": axis, "keepdims": int(bool(keepdim))},
                   name=name)
    return op.outputs[0]


def _arg_shape(ins, attrs, graphs=()):
    return [(reduced_shape(ins[0].shape, (attrs["axis"],), bool(attrs["keepdims"]))[0],
             dtypes.int32)]


define_op("ArgMax", _arg_shape, no_grad="integer output", cost="sort")
define_op("ArgMin", _arg_shape, no_grad="integer output", cost="sort")


def argmax(t: Tensor, dim: int = 0, keepdim: bool = False) -> Tensor:
    """Indices (int32) of the maximum of ``t`` along ``dim`` (negative counts
    from the end); ``keepdim`` keeps ``dim`` with size 1."""
    return _arg("ArgMax", "argmax", t, dim, keepdim)


def argmin(t: Tensor, dim: int = 0, keepdim: bool = False) -> Tensor:
    """Indices (int32) of the minimum of ``t`` along ``dim`` (negative counts
    from the end); ``keepdim`` keeps ``dim`` with size 1."""
    return _arg("ArgMin", "argmin", t, dim, keepdim)
