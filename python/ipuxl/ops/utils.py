"""Checks and conversions shared by op builders.

Every error names the op and the tensors involved, and is raised while the
graph is built, never later.
"""
from typing import Iterable, Optional, Sequence, Tuple

import numpy as np

from .. import dtypes
from ..context import get_current_graph
from ..tensor import Tensor, constant
from .rules import broadcast_small

__all__ = [
    "check_in_graph", "check_tensor", "broadcast_shapes", "to_tensor", "normalize_axis",
    "check_dtype_in", "check_same_dtype", "same_tile_set", "check_tensor_ipu_and_tile_set",
]

FLOAT_DTYPES = (dtypes.float16, dtypes.float32, dtypes.float64)
INT_DTYPES = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32,
              dtypes.uint32, dtypes.int64, dtypes.uint64)
NUMERIC_DTYPES = FLOAT_DTYPES + INT_DTYPES
ALL_DTYPES = NUMERIC_DTYPES + (dtypes.bool,)
FP8_DTYPES = (dtypes.float8_143, dtypes.float8_152)
#: Types ops that only move bytes (gather, slices, reshapes...) accept.
MOVABLE_DTYPES = ALL_DTYPES + FP8_DTYPES


def check_tensor(op: str, name: str, t) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"{op}: argument {name!r} must be a Tensor, got {type(t).__name__}")
    return t


def check_in_graph(op: str, **tensors: Optional[Tensor]) -> None:
    """Raise if any tensor is not in the current graph."""
    g = get_current_graph()
    for name, t in tensors.items():
        if t is None or (type(t) is Tensor and t._graph is g):
            continue  # the common case, without the property look-ups
        check_tensor(op, name, t)
        if t.graph is not g and t.ir is not g.ir:
            raise ValueError(
                f"{op}: tensor {t.id!r} ({name}) belongs to another Ir ({t.ir.id}) than the "
                f"current graph {g.name or 'main'!r} ({g.ir.id}). Tensors cannot move between "
                "Irs; create them in this Ir.")
        if t.graph is not g:
            raise ValueError(
                f"{op}: tensor {t.id!r} ({name}) is in graph {t.graph.name or 'main'!r} but the "
                f"current graph is {g.name or 'main'!r}. Tensors from another graph must be "
                "passed in as graph inputs.")


def same_tile_set(op: str, *ts: Tensor) -> None:
    """The inputs of one op must be on one IPU (as PopART infers each
    tensor's: see ``Tensor.ipu``; a tensor nothing places is skipped) and
    one tile set (that of their producers: tensors without one go anywhere)."""
    first = None  # (ipu, tensor) of the first placed input
    sets = set()
    for t in ts:
        if t is None:
            continue
        ipu = t._virtual_graph_id_and_tile_set()[0]
        if ipu != -1:
            if first is None:
                first = (ipu, t)
            elif ipu != first[0]:
                raise ValueError(
                    f"{op}: the input tensors {first[1].id!r} and {t.id!r} are located on "
                    f"different IPUs: {first[0]} != {ipu}. Use ops.ipu_copy "
                    "(Tensor.copy_to_ipu) to move a tensor to the IPU of the op.")
        p = t._producer
        if p is not None:
            sets.add(p._tile_set)
    if len(sets) > 1:
        raise ValueError(f"{op}: inputs are on different tile sets {sorted(sets)}; use "
                         "ops.io_tile_copy to move tensors between IO and compute tiles")


def check_tensor_ipu_and_tile_set(*args, **tensors: Tensor) -> None:
    """Check that the tensors (given as keywords, named in the message) are
    on the same virtual IPU and the same tile set, as PopXL's helper of this
    name. A tensor whose IPU or tile set is undefined (no producing op:
    variables, constants) is skipped.

    Raises:
        ValueError: two tensors are on different IPUs or tile sets.
    """
    from ..errors import UndefinedValue

    if args:
        raise Exception("Internal error: please specify all tensors as keyword arguments.")

    def where(t):
        try:
            return t._virtual_graph_id_and_tile_set()
        except UndefinedValue:
            return None, None

    placed = [(name, *where(t)) for name, t in tensors.items()]
    ipus = [(ipu, name) for name, ipu, _ in placed if ipu is not None and ipu != -1]
    sets = [(ts, name) for name, _, ts in placed if ts is not None and ts != "undefined"]
    for ipu, name in ipus[1:]:
        if ipu != ipus[0][0]:
            raise ValueError(f"The input tensors `{ipus[0][1]}` and `{name}` are located on "
                             f"different IPUs: {ipus[0][0]} != {ipu}.")
    for ts, name in sets[1:]:
        if ts != sets[0][0]:
            raise ValueError(f"The input tensors `{sets[0][1]}` and `{name}` are located on "
                             f"different tile sets: {sets[0][0]} != {ts}.")


def broadcast_shapes(op: str, *tensors: Tensor) -> Tuple[int, ...]:
    first = tensors[0].shape if tensors else ()
    if all(t.shape == first for t in tensors[1:]):
        return tuple(map(int, first))  # equal shapes: the common case
    small = broadcast_small([t.shape for t in tensors])
    if small is not None:
        return small
    try:
        return tuple(int(d) for d in np.broadcast_shapes(*[t.shape for t in tensors]))
    except ValueError:
        desc = ", ".join(f"{t.id!r} {t.shape}" for t in tensors)
        raise ValueError(f"{op}: shapes do not broadcast: {desc}") from None


def to_tensor(value, like: Optional[Tensor] = None, dtype: Optional[dtypes.dtype] = None,
              op: str = "op") -> Tensor:
    """A Tensor from a Tensor or host value (a constant of ``like``'s dtype)."""
    if isinstance(value, Tensor):
        return value
    dt = dtype if dtype is not None else (like.dtype if like is not None else None)
    if value is None:
        raise TypeError(f"{op}: cannot convert None to a tensor")
    try:
        raw = np.asarray(value)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: cannot convert {value!r} to a tensor") from None
    # Only numbers and bools become constants: complex values would lose
    # their imaginary part, dates and strings have no meaning as numbers.
    if raw.dtype.kind not in "biuf":
        raise TypeError(f"{op}: cannot convert {value!r} (numpy dtype {raw.dtype}) to a tensor; "
                        "expected a number, a bool or an array of them")
    if dt is not None:
        from ..tensor import _check_fits  # noqa: PLC0415

        # A value the tensor's dtype cannot hold would wrap (2**62 -> 0 in
        # int32) or become inf: refused, as for variables and feeds.
        if dt.as_numpy().kind != "f":  # (allow_inf: nothing to refuse for a float dtype)
            _check_fits(raw, dt.as_numpy(), f"{op}: operand {value!r}", allow_inf=True)
    try:
        arr = raw if dt is None else np.asarray(raw, dtype=dt.as_numpy())
    except (TypeError, ValueError, OverflowError):
        raise TypeError(f"{op}: cannot convert {value!r} to a tensor") from None
    return constant(arr, dt)


def normalize_axis(op: str, axis: int, rank: int, name: str = "axis") -> int:
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"{op}: {name} must be an int, got {axis!r}")
    if not -rank <= axis < max(rank, 1):
        raise ValueError(f"{op}: {name} {axis} is out of range for a tensor of rank {rank}")
    return int(axis) % max(rank, 1)


def normalize_axes(op: str, axes: Iterable[int], rank: int) -> Tuple[int, ...]:
    out = tuple(normalize_axis(op, a, rank) for a in axes)
    if len(set(out)) != len(out):
        raise ValueError(f"{op}: repeated axis in {tuple(axes)}")
    return out


def check_dtype_in(op: str, t: Tensor, allowed: Sequence[dtypes.dtype], what: str = "") -> None:
    if t.dtype not in allowed:
        names = ", ".join(d.name for d in allowed)
        raise TypeError(f"{op}: tensor {t.id!r} has dtype {t.dtype.name}; {what or 'expected'} "
                        f"one of: {names}")


def check_same_dtype(op: str, *ts: Tensor) -> None:
    dts = {t.dtype for t in ts}
    if len(dts) > 1:
        desc = ", ".join(f"{t.id!r} ({t.dtype.name})" for t in ts)
        raise TypeError(f"{op}: inputs must have the same dtype, got {desc}")
