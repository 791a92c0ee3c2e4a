"""Miscellaneous elementwise ops: ``fmod``, ``pow``, the variadic ``maximum``,
``identity``/``rename``, ``detach``/``detach_`` and ``increment_mod``/
``increment_mod_``.

Integer results never trap: ``fmod`` by 0 gives 0; ``pow`` wraps modulo
2**bits and a negative integer exponent gives 1 for base 1, +-1 for base -1
and 0 otherwise.
"""
import math
import numbers
from typing import Optional, Union

import numpy as np

from ..op import create_op
from ..tensor import Tensor
from .utils import (NUMERIC_DTYPES, broadcast_shapes, check_dtype_in, check_in_graph,
                    check_same_dtype, check_tensor, same_tile_set, to_tensor)

__all__ = [
    "fmod", "pow", "maximum", "identity", "rename", "detach", "detach_", "increment_mod",
    "increment_mod_",
]


def fmod(lhs: Tensor, rhs: Tensor) -> Tensor:
    """Elementwise remainder of ``lhs / rhs`` with the sign of ``lhs`` (C
    ``fmod``, ``numpy.fmod``, ``torch.fmod``), with NumPy broadcasting. Both
    operands must have the same numeric dtype; a host value for ``rhs`` becomes
    a constant of ``lhs``'s dtype. Floats: ``fmod(x, 0)`` is NaN. Integers:
    ``fmod(x, 0)`` is 0.
    """
    if not isinstance(lhs, Tensor):
        raise TypeError(f"fmod: lhs must be a Tensor, got {type(lhs).__name__}")
    rhs = to_tensor(rhs, like=lhs, op="fmod")
    check_in_graph("fmod", lhs=lhs, rhs=rhs)
    same_tile_set("fmod", lhs, rhs)
    check_same_dtype("fmod", lhs, rhs)
    check_dtype_in("fmod", lhs, NUMERIC_DTYPES)
    shape = broadcast_shapes("fmod", lhs, rhs)
    return create_op("Fmod", [lhs, rhs], [("fmod_out", shape, lhs.dtype)], name="fmod").outputs[0]


def pow(t: Tensor, e: Union[float, int, Tensor]) -> Tensor:  # noqa: A001 - PopXL name
    """Elementwise ``t ** e`` with NumPy broadcasting.

    ``e`` is a Tensor of ``t``'s dtype, or a host value (float, int, array)
    converted to a constant of ``t``'s dtype; for an integer ``t`` a host
    exponent must hold whole numbers. Integer powers wrap modulo 2**bits; a
    negative integer exponent gives 1 for base 1, +-1 for base -1 and 0
    otherwise (also for base 0).
    """
    check_tensor("pow", "t", t)
    if not isinstance(e, Tensor):
        if isinstance(e, (bool, np.bool_)):
            raise TypeError(f"pow: exponent must be a number or a Tensor, got {e!r}")
        try:
            arr = np.asarray(e)
        except (TypeError, ValueError):
            raise TypeError(f"pow: cannot convert exponent {e!r} to a tensor") from None
        if arr.dtype == object or arr.dtype.kind not in "iuf":
            raise TypeError(f"pow: exponent must be numeric, got {e!r}")
        if t.dtype.is_int and not np.all(np.mod(arr, 1) == 0):
            raise TypeError(f"pow: tensor {t.id!r} has dtype {t.dtype.name}; a fractional "
                            f"exponent {e!r} is not supported, cast {t.id!r} to a float type")
        e = to_tensor(arr, dtype=t.dtype if t.dtype in NUMERIC_DTYPES else None, op="pow")
    check_in_graph("pow", t=t, e=e)
    same_tile_set("pow", t, e)
    check_dtype_in("pow", t, NUMERIC_DTYPES)
    check_same_dtype("pow", t, e)
    shape = broadcast_shapes("pow", t, e)
    return create_op("Pow", [t, e], [("pow_out", shape, t.dtype)], name="pow").outputs[0]


def maximum(*ts: Tensor) -> Tensor:
    """Elementwise maximum of one or more tensors of one numeric dtype, with
    NumPy broadcasting. NaN propagates (as ``numpy.maximum``)."""
    if not ts:
        raise ValueError("maximum: at least one tensor is required")
    check_in_graph("maximum", **{f"ts_{i}": t for i, t in enumerate(ts)})
    same_tile_set("maximum", *ts)
    check_same_dtype("maximum", *ts)
    check_dtype_in("maximum", ts[0], NUMERIC_DTYPES)
    shape = broadcast_shapes("maximum", *ts)
    return create_op("Max", list(ts), [("maximum_out", shape, ts[0].dtype)],
                     name="maximum").outputs[0]


def identity(t: Tensor, output_name: Optional[str] = None) -> Tensor:
    """A copy of ``t`` (any dtype), named ``output_name`` (default
    ``identity_<t.name>``). ``rename`` is an alias."""
    check_in_graph("identity", t=t)
    if output_name is not None and not isinstance(output_name, str):
        raise TypeError(f"identity: output_name must be a str, got {output_name!r}")
    name = output_name if output_name else f"identity_{t.name}"
    return create_op("Identity", [t], [(name, t.shape, t.dtype)], name="identity").outputs[0]


rename = identity


def detach(t: Tensor) -> Tensor:
    """A copy of ``t`` through which no gradient flows (numerically the
    identity)."""
    check_in_graph("detach", t=t)
    return create_op("Detach", [t], [("detach_out", t.shape, t.dtype)], name="detach").outputs[0]


def detach_(t: Tensor) -> Tensor:
    """In-place ``detach``: the output is a view sharing ``t``'s storage (no
    copy); no gradient flows through it."""
    check_in_graph("detach_", t=t)
    op = create_op("DetachInplace", [t], [("detach_out", t.shape, t.dtype)], name="detach_",
                   aliases=[(0, 0)])
    return op.outputs[0]


def _increment_mod_args(name: str, t: Tensor, increment, modulus):
    check_in_graph(name, t=t)
    check_dtype_in(name, t, NUMERIC_DTYPES)
    vals = []
    for arg, v in (("increment", increment), ("modulus", modulus)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
            raise TypeError(f"{name}: {arg} must be a number, got {v!r}")
        f = float(v)
        if not math.isfinite(f):
            raise ValueError(f"{name}: {arg} must be finite, got {v!r}")
        if t.dtype.is_int:
            info = np.iinfo(t.dtype.as_numpy())
            if not info.min <= math.trunc(f) <= info.max:
                raise ValueError(f"{name}: {arg} {v!r} is out of range for tensor {t.id!r} of "
                                 f"dtype {t.dtype.name}")
        vals.append(f)
    inc, mod = vals
    if (math.trunc(mod) if t.dtype.is_int else mod) == 0:
        raise ValueError(f"{name}: modulus must not be 0 (it is {modulus!r} for tensor {t.id!r} "
                         f"of dtype {t.dtype.name}; integer tensors truncate it)")
    return {"increment": inc, "modulus": mod}


def increment_mod(t: Tensor, increment: float, modulus: float) -> Tensor:
    """``(t + increment) % modulus`` elementwise (numeric dtypes).

    As in PopART, ``increment`` and ``modulus`` are first converted to ``t``'s
    type (truncated toward zero for integers) and the remainder takes the sign
    of the dividend (C ``fmod``). ``modulus`` must be non-zero after that
    conversion.
    """
    attrs = _increment_mod_args("increment_mod", t, increment, modulus)
    return create_op("IncrementMod", [t], [("increment_mod_out", t.shape, t.dtype)], attrs,
                     name="increment_mod").outputs[0]


def increment_mod_(t: Tensor, increment: float, modulus: float) -> Tensor:
    """In-place ``increment_mod``: writes into ``t`` and returns it."""
    attrs = _increment_mod_args("increment_mod_", t, increment, modulus)
    op = create_op("IncrementModInplace", [t], [("increment_mod_inplace_out", t.shape, t.dtype)],
                   attrs, name="increment_mod_", aliases=[(0, 0)], modified=[0])
    return op.outputs[0]
