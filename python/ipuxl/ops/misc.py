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
from ..opdef import Cost, define_op
from ..tensor import Tensor
from .rules import broadcast, like_input
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
    broadcast_shapes("fmod", lhs, rhs)
    return create_op("Fmod", [lhs, rhs], ["fmod_out"], name="fmod").outputs[0]


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
    broadcast_shapes("pow", t, e)
    return create_op("Pow", [t, e], ["pow_out"], name="pow").outputs[0]


def maximum(*ts: Tensor) -> Tensor:
    """Elementwise maximum of one or more tensors of one numeric dtype, with
    NumPy broadcasting. NaN propagates (as ``numpy.maximum``)."""
    if not ts:
        raise ValueError("maximum: at least one tensor is required")
    check_in_graph("maximum", **{f"ts_{i}": t for i, t in enumerate(ts)})
    same_tile_set("maximum", *ts)
    check_same_dtype("maximum", *ts)
    check_dtype_in("maximum", ts[0], NUMERIC_DTYPES)
    broadcast_shapes("maximum", *ts)
    return create_op("Max", list(ts), ["maximum_out"], name="maximum").outputs[0]


def identity(t: Tensor, output_name: Optional[str] = None) -> Tensor:
    """A copy of ``t`` (any dtype), named ``output_name`` (default
    ``identity_<t.name>``). ``rename`` is an alias."""
    check_in_graph("identity", t=t)
    if output_name is not None and not isinstance(output_name, str):
        raise TypeError(f"identity: output_name must be a str, got {output_name!r}")
    name = output_name if output_name else f"identity_{t.name}"
    return create_op("Identity", [t], [name], name="identity").outputs[0]


rename = identity


def detach(t: Tensor) -> Tensor:
    """A copy of ``t`` through which no gradient flows (numerically the
    identity)."""
    check_in_graph("detach", t=t)
    return create_op("Detach", [t], ["detach_out"], name="detach").outputs[0]


def detach_(t: Tensor) -> Tensor:
    """In-place ``detach``: the output is a view sharing ``t``'s storage (no
    copy); no gradient flows through it."""
    check_in_graph("detach_", t=t)
    return create_op("DetachInplace", [t], ["detach_out"], name="detach_").outputs[0]


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
    return create_op("IncrementMod", [t], ["increment_mod_out"], attrs,
                     name="increment_mod").outputs[0]


def increment_mod_(t: Tensor, increment: float, modulus: float) -> Tensor:
    """In-place ``increment_mod``: writes into ``t`` and returns it."""
    attrs = _increment_mod_args("increment_mod_", t, increment, modulus)
    return create_op("IncrementModInplace", [t], ["increment_mod_inplace_out"], attrs,
                     name="increment_mod_").outputs[0]


#: [assumption] Pow and Fmod: BinaryOp1D's header, 20 cycles per vector.
_POW_COST = dict(header=(29, 26), per_vector=(20, 20), unroll=(2, 4))
# PopART's grad ops of Pow and Fmod read the forward output.
define_op("Fmod", broadcast(), stash_outputs=True, cost=Cost("elementwise", **_POW_COST))
define_op("Pow", broadcast(), stash_outputs=True, cost=Cost("elementwise", **_POW_COST))
define_op("Max", broadcast(), cost="elementwise")
define_op("Identity", like_input(0), cost="copy")
define_op("Detach", like_input(0), cost="copy")
define_op("DetachInplace", like_input(0), aliases=((0, 0),), cost="view")
define_op("IncrementMod", like_input(0), cost="elementwise")
define_op("IncrementModInplace", like_input(0), aliases=((0, 0),), modifies=(0,),
          no_grad="modifies its input (autodiff rejects modifying ops)", cost=Cost("elementwise", vertex="IncrementMod"))


# ---- gradient rules
#
# Rules emit ordinary forward ops (so that gradient graphs can be
# differentiated again) and sum broadcast gradients down to operand shapes.

from ..grad import register_grad  # noqa: E402
from ..tensor import Constant  # noqa: E402


def _ops():
    from .. import ops as _o  # the full ops namespace, loaded by the time rules run

    return _o


@register_grad("Fmod")
def _fmod_grad(ctx):
    """``fmod(a, b) = a - trunc(a/b) b``: d/da = 1, d/db = -trunc(a/b)
    (as ``torch.fmod``; the jumps where a/b is a whole number are ignored)."""
    o = _ops()
    g = ctx.g()
    da = ctx.unbroadcast(g, 0) if ctx.needs(0) else None
    db = None
    if ctx.needs(1):
        q = ctx.x(0) / ctx.x(1)
        negative = o.greater(to_tensor(0.0, like=q, op="fmod grad"), q)
        trunc = o.where(negative, o.ceil(q), o.floor(q))
        db = ctx.unbroadcast(o.negate(g * trunc), 1)
    return [da, db]


@register_grad("Pow")
def _pow_grad(ctx):
    """``y = a ** b``, PyTorch's conventions:

    * d/da = b a**(b-1), and 0 where b == 0 (so 0**0 has slope 0, not NaN);
    * d/db = y log(a), and 0 where a == 0 and b >= 0; for a < 0 it is NaN
      (log of a negative number), as in PyTorch.
    """
    o = _ops()
    g = ctx.g()
    a, e_fwd = ctx.x(0), ctx.op.inputs[1]
    da = db = None
    if ctx.needs(0):
        if isinstance(e_fwd, Constant):
            # A host exponent (x ** 2): its b-1 and zero mask are host values.
            eh = np.asarray(e_fwd._host_data)
            slope = ctx.x(1) * pow(a, eh - 1)
            d = g * slope
            if np.any(eh == 0):
                d = o.where(o.equal(ctx.x(1), 0.0), 0.0, d)
        else:
            e = ctx.x(1)
            d = o.where(o.equal(e, 0.0), 0.0, g * (e * pow(a, e - 1.0)))
        da = ctx.unbroadcast(d, 0)
    if ctx.needs(1):
        e = ctx.x(1)
        d = g * (ctx.y() * o.log(a))
        e_negative = o.greater(to_tensor(0.0, like=e, op="pow grad"), e)
        zero_base = o.logical_and(o.equal(a, 0.0), o.logical_not(e_negative))
        db = ctx.unbroadcast(o.where(zero_base, 0.0, d), 1)
    return [da, db]


@register_grad("Max")
def _max_grad(ctx):
    """The gradient goes to the input(s) equal to the maximum, split equally
    between ties (as ``torch.maximum`` for two inputs, so that the gradients
    sum to the output gradient). PopART's MaxArgGrad instead gives every tied
    input the full gradient; the two differ only at ties. Where the maximum
    is NaN no input matches and every gradient is 0."""
    o = _ops()
    g = ctx.g()
    n = len(ctx.op.inputs)
    if n == 1:
        return [g]
    y = ctx.y()
    masks = [o.cast(o.equal(ctx.x(i), y), g.dtype) for i in range(n)]
    count = masks[0]
    for m in masks[1:]:
        count = count + m
    share = g / maximum(count, to_tensor(1.0, like=count, op="maximum grad"))
    return [ctx.unbroadcast(share * masks[i], i) if ctx.needs(i) else None for i in range(n)]


@register_grad("Identity")
def _identity_grad(ctx):
    """d identity(x) = 1."""
    return [ctx.g()]


@register_grad("Detach", nondiff=(0,))
@register_grad("DetachInplace", nondiff=(0,))
def _detach_grad(ctx):
    """No gradient flows through ``detach``: its input is non-differentiable,
    so a required gradient reachable only through it is an error."""
    return [None]


@register_grad("IncrementMod")
def _increment_mod_grad(ctx):
    """``(x + c) fmod m`` has slope 1 wherever it is continuous (the jumps
    where it wraps are ignored, as for ``fmod``). PopART gives IncrementMod no
    gradient op; ipuxl uses this derivative so float inputs can be
    differentiated."""
    return [ctx.g()]
