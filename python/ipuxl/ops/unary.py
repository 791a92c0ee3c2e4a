"""Elementwise unary ops: math functions, activations, rounding, sign, clip
and the NaN/Inf predicates, with the in-place forms PopXL has (``exp_``,
``relu_``, ``gelu_``, ``geluerf_``, ``swish_``), which write into and return
their input.

Float-only ops (``sqrt``, ``exp``, ``log``, ``log2``, ``sin``, ``cos``,
``tanh``, ``gelu``, ``geluerf``, ``swish``, ``ceil``, ``floor``) raise
``TypeError`` for other dtypes. ``abs``, ``negate``, ``relu``, ``sign`` and
``clip`` also take integers (``negate``/``abs`` wrap: ``-INT_MIN == INT_MIN``).
"""
import math
import numbers
from typing import Sequence

import numpy as np

from .. import dtypes
from ..op import create_op
from ..tensor import Tensor
from .utils import FLOAT_DTYPES, NUMERIC_DTYPES, check_dtype_in, check_in_graph, to_tensor

__all__ = [
    "abs", "negate", "sqrt", "exp", "exp_", "log", "log2", "sin", "cos", "tanh",
    "relu", "relu_", "gelu", "gelu_", "geluerf", "geluerf_", "swish", "swish_",
    "ceil", "floor", "sign", "isnan", "isinf", "isfinite", "clip", "clamp",
]


def _unary(kind: str, name: str, t: Tensor, allowed: Sequence[dtypes.dtype],
           inplace: bool = False, out_dtype=None) -> Tensor:
    """Create a one-input elementwise op whose output has ``t``'s shape."""
    check_in_graph(name, t=t)
    what = "expected a floating point dtype, one of" if allowed is FLOAT_DTYPES else ""
    check_dtype_in(name, t, allowed, what)
    dt = out_dtype if out_dtype is not None else t.dtype
    if inplace:
        op = create_op(kind, [t], [(f"{name.rstrip('_')}_inplace_out", t.shape, dt)],
                       name=name, aliases=[(0, 0)], modified=[0])
    else:
        op = create_op(kind, [t], [(f"{name}_out", t.shape, dt)], name=name)
    return op.outputs[0]


def abs(t: Tensor) -> Tensor:  # noqa: A001 - PopXL name
    """Elementwise absolute value (numeric dtypes; integers wrap, so
    ``abs(INT_MIN) == INT_MIN``)."""
    return _unary("Abs", "abs", t, NUMERIC_DTYPES)


def negate(t: Tensor) -> Tensor:
    """Elementwise ``-t`` (numeric dtypes; integers wrap modulo 2**bits)."""
    return _unary("Neg", "negate", t, NUMERIC_DTYPES)


def sqrt(t: Tensor) -> Tensor:
    """Elementwise square root (float dtypes; negative inputs give NaN)."""
    return _unary("Sqrt", "sqrt", t, FLOAT_DTYPES)


def exp(t: Tensor) -> Tensor:
    """Elementwise ``e**t`` (float dtypes)."""
    return _unary("Exp", "exp", t, FLOAT_DTYPES)


def exp_(t: Tensor) -> Tensor:
    """``exp`` in place: writes ``e**t`` into ``t`` and returns it."""
    return _unary("ExpInplace", "exp_", t, FLOAT_DTYPES, inplace=True)


def log(t: Tensor) -> Tensor:
    """Elementwise natural logarithm (float dtypes; ``log(0) == -inf``,
    negative inputs give NaN)."""
    return _unary("Log", "log", t, FLOAT_DTYPES)


def log2(t: Tensor) -> Tensor:
    """Elementwise base-2 logarithm, built as PopXL does: ``log(t) / log(2)``
    (two ops, the division by a constant of ``t``'s dtype)."""
    from .binary import div

    num = log(t)
    den = to_tensor(np.asarray(math.log(2.0), dtype=t.dtype.as_numpy()), dtype=t.dtype,
                    op="log2")
    return div(num, den)


def sin(t: Tensor) -> Tensor:
    """Elementwise sine (float dtypes)."""
    return _unary("Sin", "sin", t, FLOAT_DTYPES)


def cos(t: Tensor) -> Tensor:
    """Elementwise cosine (float dtypes)."""
    return _unary("Cos", "cos", t, FLOAT_DTYPES)


def tanh(t: Tensor) -> Tensor:
    """Elementwise hyperbolic tangent (float dtypes)."""
    return _unary("Tanh", "tanh", t, FLOAT_DTYPES)


def relu(t: Tensor) -> Tensor:
    """Elementwise ``max(t, 0)`` (numeric dtypes; NaN propagates)."""
    return _unary("Relu", "relu", t, NUMERIC_DTYPES)


def relu_(t: Tensor) -> Tensor:
    """``relu`` in place: writes into ``t`` and returns it."""
    return _unary("ReluInplace", "relu_", t, NUMERIC_DTYPES, inplace=True)


def gelu(t: Tensor) -> Tensor:
    """GELU activation in PopART's tanh approximation (float dtypes):
    ``0.5 t (1 + tanh(sqrt(2/pi) (t + 0.044715 t**3)))``. See ``geluerf`` for
    the exact form."""
    return _unary("Gelu", "gelu", t, FLOAT_DTYPES)


def gelu_(t: Tensor) -> Tensor:
    """``gelu`` in place: writes into ``t`` and returns it."""
    return _unary("GeluInplace", "gelu_", t, FLOAT_DTYPES, inplace=True)


def geluerf(t: Tensor) -> Tensor:
    """Exact GELU activation (float dtypes): ``0.5 t (1 + erf(t / sqrt(2)))``."""
    return _unary("GeluErf", "geluerf", t, FLOAT_DTYPES)


def geluerf_(t: Tensor) -> Tensor:
    """``geluerf`` in place: writes into ``t`` and returns it."""
    return _unary("GeluErfInplace", "geluerf_", t, FLOAT_DTYPES, inplace=True)


def swish(t: Tensor) -> Tensor:
    """Swish (SiLU) activation ``t * sigmoid(t)`` (float dtypes)."""
    return _unary("Swish", "swish", t, FLOAT_DTYPES)


def swish_(t: Tensor) -> Tensor:
    """``swish`` in place: writes into ``t`` and returns it."""
    return _unary("SwishInplace", "swish_", t, FLOAT_DTYPES, inplace=True)


def ceil(t: Tensor) -> Tensor:
    """Elementwise ceiling (float dtypes; NaN propagates)."""
    return _unary("Ceil", "ceil", t, FLOAT_DTYPES)


def floor(t: Tensor) -> Tensor:
    """Elementwise floor (float dtypes; NaN propagates)."""
    return _unary("Floor", "floor", t, FLOAT_DTYPES)


def sign(t: Tensor) -> Tensor:
    """Elementwise sign, -1, 0 or 1 in ``t``'s dtype (numeric dtypes; NaN
    gives 0)."""
    return _unary("Sign", "sign", t, NUMERIC_DTYPES)


def isnan(t: Tensor) -> Tensor:
    """Bool tensor, True where ``t`` is NaN (numeric dtypes; always False for
    integers)."""
    return _unary("IsNaN", "isnan", t, NUMERIC_DTYPES, out_dtype=dtypes.bool)


def isinf(t: Tensor) -> Tensor:
    """Bool tensor, True where ``t`` is +inf or -inf (numeric dtypes; always
    False for integers)."""
    return _unary("IsInf", "isinf", t, NUMERIC_DTYPES, out_dtype=dtypes.bool)


def isfinite(t: Tensor) -> Tensor:
    """Bool tensor, True where ``t`` is neither NaN nor infinite. Built as
    PopXL does: ``~(isnan(t) | isinf(t))``, renamed ``isfinite_out``."""
    from .logical import logical_not, logical_or
    from .misc import rename

    return rename(logical_not(logical_or(isnan(t), isinf(t))), "isfinite_out")


def _bound(name: str, arg: str, v) -> float:
    if isinstance(v, Tensor):
        raise TypeError(f"{name}: {arg} must be a number, not a Tensor ({v.id!r})")
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name}: {arg} must be a float, got {v!r}")
    f = float(v)
    if math.isnan(f):
        raise ValueError(f"{name}: {arg} must not be NaN")
    return f


def clip(t: Tensor, min: float = float("-inf"), max: float = float("inf")) -> Tensor:  # noqa: A002
    """Clip every element to ``[min, max]`` (numeric dtypes; NaN propagates).

    The result is ``minimum(maximum(t, min), max)``: if ``min > max`` every
    element becomes ``max`` (as NumPy and PyTorch). For integer tensors the
    bounds are rounded inward (``ceil(min)``, ``floor(max)``) and saturate at
    the type's range.

    Raises:
        TypeError: ``min``/``max`` are not real numbers, or ``t`` has a
            non-numeric dtype.
        ValueError: ``min``/``max`` is NaN, or ``t`` is not in the current graph.
    """
    check_in_graph("clip", t=t)
    lo = _bound("clip", "min", min)
    hi = _bound("clip", "max", max)
    check_dtype_in("clip", t, NUMERIC_DTYPES)
    op = create_op("Clip", [t], [("clip_out", t.shape, t.dtype)], {"min": lo, "max": hi},
                   name="clip")
    return op.outputs[0]


clamp = clip
