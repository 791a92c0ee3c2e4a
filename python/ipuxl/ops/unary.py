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
from ..opdef import Cost, define_op
from ..tensor import Tensor
from .rules import like_input
from .utils import FLOAT_DTYPES, NUMERIC_DTYPES, check_dtype_in, check_in_graph, to_tensor

__all__ = [
    "abs", "negate", "sqrt", "exp", "exp_", "log", "log2", "sin", "cos", "tanh",
    "relu", "relu_", "gelu", "gelu_", "geluerf", "geluerf_", "swish", "swish_",
    "ceil", "floor", "sign", "isnan", "isinf", "isfinite", "clip", "clamp",
]


def _unary(kind: str, name: str, t: Tensor, allowed: Sequence[dtypes.dtype],
           inplace: bool = False) -> Tensor:
    """Create a one-input elementwise op whose output has ``t``'s shape."""
    check_in_graph(name, t=t)
    what = "expected a floating point dtype," if allowed is FLOAT_DTYPES else ""
    check_dtype_in(name, t, allowed, what)
    out = f"{name.rstrip('_')}_inplace_out" if inplace else f"{name}_out"
    return create_op(kind, [t], [out], name=name).outputs[0]


_SAME_SHAPE = ("Abs", "Neg", "Sqrt", "Exp", "Log", "Sin", "Cos", "Tanh", "Relu", "Gelu", "GeluErf",
              "Swish", "Ceil", "Floor", "Sign", "Clip")
#: IPU-model figures of UnaryOp1D (shared/reference/ipu_model.md §3.1):
#: (header, per_vector, unroll), each (other dtypes, float16); ops the table
#: does not list take the class defaults, and the transcendental ones it
#: does not list [assumption] exp's header and a polynomial's cycles.
_FIGURES = {
    "Exp": ((42, 42), (6, 4), (2, 4)),
    "Tanh": ((26, 26), (12, 4), (2, 4)),
    "Sqrt": ((26, 26), (10, 23), (2, 4)),
    **{t: ((42, 42), (14, 8), (2, 4)) for t in ("Log", "Gelu", "GeluErf", "Swish", "Sin", "Cos")},
}


def _cost(t: str) -> Cost:
    """The cost of op ``t`` and of its in-place variant (same vertex)."""
    if t not in _FIGURES:
        return Cost("elementwise", vertex=t)
    header, per_vector, unroll = _FIGURES[t]
    return Cost("elementwise", vertex=t, header=header, per_vector=per_vector, unroll=unroll)


for _t in _SAME_SHAPE:
    define_op(_t, like_input(0), cost=_cost(_t))
for _t in ("IsNaN", "IsInf"):
    define_op(_t, like_input(0, dtypes.bool), no_grad="boolean output", cost="elementwise")
for _t in ("Exp", "Relu", "Gelu", "GeluErf", "Swish"):
    define_op(f"{_t}Inplace", like_input(0), aliases=((0, 0),), modifies=(0,),
              no_grad="modifies its input (autodiff rejects modifying ops)", cost=_cost(_t))


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
    return _unary("IsNaN", "isnan", t, NUMERIC_DTYPES)


def isinf(t: Tensor) -> Tensor:
    """Bool tensor, True where ``t`` is +inf or -inf (numeric dtypes; always
    False for integers)."""
    return _unary("IsInf", "isinf", t, NUMERIC_DTYPES)


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
    op = create_op("Clip", [t], ["clip_out"], {"min": lo, "max": hi},
                   name="clip")
    return op.outputs[0]


clamp = clip


# ---- gradient rules and decompositions
#
# Every rule emits ordinary forward ops (so gradient graphs can be
# differentiated again); each rule's formula is in its docstring. Integer
# tensors never receive gradients, so the rules only see float inputs.

from ..grad import register_decomposition, register_grad  # noqa: E402

_SQRT_2_OVER_PI = 0.7978845608028654   # sqrt(2/pi), the constant of the Gelu kernel
_GELU_A = 0.044715                     # cubic coefficient of the Gelu kernel
_INV_SQRT_2PI = 0.3989422804014327     # 1/sqrt(2 pi): the standard normal density at 0
_INV_SQRT_2 = 0.7071067811865476


def _ops():
    from .. import ops as _o  # the full ops namespace, loaded by the time rules run

    return _o


def _less(t: Tensor, c: float) -> Tensor:
    """``t < c`` for a host number ``c`` (``greater`` needs a Tensor first)."""
    return _ops().greater(to_tensor(c, like=t, op="grad"), t)


@register_grad("Abs")
def _abs_grad(ctx):
    """d|x| = sign(x) (0 at x == 0, as PyTorch)."""
    return [ctx.g() * sign(ctx.x(0))]


@register_grad("Neg")
def _neg_grad(ctx):
    """d(-x) = -1."""
    return [negate(ctx.g())]


@register_grad("Sqrt")
def _sqrt_grad(ctx):
    """d sqrt(x) = 1 / (2 sqrt(x)) (inf at 0, as PyTorch)."""
    return [ctx.g() / (ctx.y() * 2.0)]


@register_grad("Exp")
def _exp_grad(ctx):
    """d e**x = e**x."""
    return [ctx.g() * ctx.y()]


@register_grad("Log")
def _log_grad(ctx):
    """d log(x) = 1 / x. (``log2`` is Log followed by Div, both with rules.)"""
    return [ctx.g() / ctx.x(0)]


@register_grad("Sin")
def _sin_grad(ctx):
    """d sin(x) = cos(x)."""
    return [ctx.g() * cos(ctx.x(0))]


@register_grad("Cos")
def _cos_grad(ctx):
    """d cos(x) = -sin(x)."""
    return [negate(ctx.g() * sin(ctx.x(0)))]


define_op("TanhGrad", like_input(0), cost="elementwise")


@register_grad("Tanh")
def _tanh_grad(ctx):
    """``TanhGrad(g, y)`` (PopART's TanhGradOp, grown as
    ``popnn::nonLinearityInputGradient(TANH)``): ``g * (1 - y**2)`` from the
    forward output, one op; its decomposition, for differentiating it
    again, is :func:`_tanh_grad_decomposition`."""
    return [create_op("TanhGrad", [ctx.g(), ctx.y()], ["tanh_grad_out"], {},
                      name="tanh_grad").outputs[0]]


@register_decomposition("TanhGrad")
def _tanh_grad_decomposition(op, g, y):
    """``g * (1 - y*y)``, in the order the kernel rounds it."""
    return [g * (1.0 - y * y)]


define_op("ReluGrad", like_input(0), cost="elementwise")


@register_grad("Relu")
def _relu_grad(ctx):
    """``ReluGrad(g, y)`` (PopART's ReluGradOp, grown as
    ``popnn::nonLinearityInputGradient(RELU)``): ``g`` where ``y > 0``, else
    0 (0 at x == 0, as PyTorch). Read from the output (relu(x) > 0 exactly
    where x > 0), as PopART does: the gradient graph keeps the activation it
    already needs for the next layer's weight gradient, not also the one
    before. Its decomposition is :func:`_relu_grad_decomposition`."""
    return [create_op("ReluGrad", [ctx.g(), ctx.y(0)], ["relu_grad_out"], {},
                      name="relu_grad").outputs[0]]


@register_decomposition("ReluGrad")
def _relu_grad_decomposition(op, g, y):
    o = _ops()
    return [o.where(o.greater(y, 0.0), g, 0.0)]


def _sigmoid(x: Tensor) -> Tensor:
    """sigmoid(x) = 1 / (1 + e) for x >= 0, e / (1 + e) below, e = exp(-|x|):
    no overflow for any x, and accurate in both tails (the tanh form
    (1 + tanh(x/2)) / 2 cancels to 0 once tanh rounds to -1, at x < -8 in
    float16, though sigmoid(-10) = 4.5e-5 is a float16 number)."""
    o = _ops()
    e = exp(negate(o.abs(x)))
    return o.where(_less(x, 0.0), e, to_tensor(1.0, like=x, op="swish")) / (1.0 + e)


@register_grad("Swish")
def _swish_grad(ctx):
    """d (x sigmoid(x)) = s (1 + x (1 - s)) with s = sigmoid(x), computed in
    float32 for float16 tensors (as PopART's half SwishGrad, which reads x
    and evaluates the sigmoid at full precision) and multiplied by the
    incoming gradient in the tensor's dtype."""
    return [ctx.g() * _swish_derivative(None, ctx.x(0))[0]]


define_op("GeluGrad", like_input(0), cost="elementwise")


@register_grad("Gelu")
def _gelu_grad(ctx):
    """``GeluGrad(g, x)`` (PopART's GeluGradOp): ``g * gelu'(x)``, the exact
    derivative of the kernel's tanh approximation, in one kernel. Its value,
    for differentiating it again, is :func:`_gelu_grad_decomposition`."""
    return [create_op("GeluGrad", [ctx.g(), ctx.x(0)], ["gelu_grad_out"], {},
                      name="gelu_grad").outputs[0]]


@register_decomposition("GeluGrad")
def _gelu_grad_decomposition(op, g, x):
    """Exact derivative of ``y = x/2 (1 + tanh(u))``, ``u = k (x + a x**3)``,
    ``k = sqrt(2/pi)``, ``a = 0.044715``:

        dy/dx = (1 + t)/2 + x/2 (1 - t**2) k (1 + 3 a x**2),  t = tanh(u)
    """
    x2 = x * x
    t = tanh(x * (_SQRT_2_OVER_PI + (_SQRT_2_OVER_PI * _GELU_A) * x2))
    du = _SQRT_2_OVER_PI + (3.0 * _SQRT_2_OVER_PI * _GELU_A) * x2
    d = 0.5 * (1.0 + t) + (0.5 * x) * ((1.0 - t * t) * du)
    return [g * d]


def _normal_cdf_from_geluerf(x: Tensor) -> Tensor:
    """Phi(x), the standard normal CDF, without an erf op: ``geluerf(x) / x``
    where |x| >= 0.1, else its Taylor series ``1/2 + (x - x**3/6 + x**5/40)
    / sqrt(2 pi)`` (truncation error < 1e-10 there). The denominator is
    replaced by 1 where the series is used, so no 0/0 appears in the graph
    (whose gradient would be NaN even where it is not selected)."""
    o = _ops()
    small = _less(abs(x), 0.1)
    safe = o.where(small, 1.0, x)
    ratio = geluerf(safe) / safe
    x2 = x * x
    series = 0.5 + (_INV_SQRT_2PI * x) * (1.0 + x2 * (-1.0 / 6.0 + x2 * (1.0 / 40.0)))
    return o.where(small, series, ratio)


@register_grad("GeluErf")
def _geluerf_grad(ctx):
    """d (x Phi(x)) = Phi(x) + x phi(x), phi(x) = exp(-x**2/2) / sqrt(2 pi)."""
    x = ctx.x(0)
    phi = exp(x * x * -0.5) * _INV_SQRT_2PI
    return [ctx.g() * (_normal_cdf_from_geluerf(x) + x * phi)]


@register_grad("Ceil")
@register_grad("Floor")
@register_grad("Sign")
def _zero_grad(ctx):
    """Piecewise constant: the gradient is zero almost everywhere."""
    return [None]


@register_grad("Clip")
def _clip_grad(ctx):
    """The gradient passes where ``min < x < max`` (strictly) and is 0
    elsewhere. This is PopART's ClipGrad convention (it masks elements whose
    output equals a bound); PyTorch's ``clamp`` instead passes it at the bounds
    too (``min <= x <= max``). The two differ only at x == min or x == max.
    NaN inputs get a zero gradient."""
    o = _ops()
    x = ctx.x(0)
    lo, hi = float(ctx.attrs["min"]), float(ctx.attrs["max"])
    conds = []
    if lo != float("-inf"):
        conds.append(o.greater(x, lo))
    if hi != float("inf"):
        conds.append(_less(x, hi))
    g = ctx.g()
    if not conds:
        return [g]
    inside = conds[0] if len(conds) == 1 else o.logical_and(conds[0], conds[1])
    return [o.where(inside, g, 0.0)]


# Decompositions: the op's value from other differentiable ops, used by
# autodiff when a rule is absent or forced off (tests compare both paths).
# float16 inputs are decomposed in float32 and cast back, as the kernels
# compute float16 in float: the formulas below overflow or lose too much
# precision in float16 (e.g. (e**2x + 1)**2 in the division's gradient).

def _in_float32(fn):
    def deco(op, x):
        o = _ops()
        if x.dtype == dtypes.float16:
            return [o.cast(fn(o.cast(x, dtypes.float32)), dtypes.float16)]
        return [fn(x)]
    return deco


@_in_float32
def _swish_derivative(x):
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


_TANH_CLAMP = 20.0  # tanh(20) == 1 in float32 and to 1e-17 in float64


def _tanh_via_exp(x: Tensor) -> Tensor:
    # tanh(x) = 1 - 2 / (e**2x + 1); x is clamped so that e**2x stays finite
    # (beyond the clamp tanh is 1 to working precision and its slope ~0).
    return 1.0 - 2.0 / (exp(clip(x, -_TANH_CLAMP, _TANH_CLAMP) * 2.0) + 1.0)


@register_decomposition("Tanh")
@_in_float32
def _tanh_decomposition(x):
    return _tanh_via_exp(x)


@register_decomposition("Gelu")
@_in_float32
def _gelu_decomposition(x):
    u = x * (_SQRT_2_OVER_PI + (_SQRT_2_OVER_PI * _GELU_A) * (x * x))
    return (x * 0.5) * (1.0 + tanh(u))


@register_decomposition("Swish")
@_in_float32
def _swish_decomposition(x):
    return x * _sigmoid(x)


# erfc(z) for z >= 0 as t exp(-z**2 + P(t)), t = 1 / (1 + z/2), with the
# Chebyshev-fitted polynomial P of Numerical Recipes' erfcc: relative error
# below 1.2e-7 for every z >= 0, and its derivative within about 1e-5 of
# -2 exp(-z**2)/sqrt(pi).
_ERFC_P = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
           -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def _erfc_nonneg(z: Tensor) -> Tensor:
    t = 1.0 / (1.0 + z * 0.5)
    p = t * _ERFC_P[-1]
    for c in reversed(_ERFC_P[1:-1]):
        p = t * (p + c)
    p = p + _ERFC_P[0]
    return t * exp(p - z * z)


@register_decomposition("GeluErf")
@_in_float32
def _geluerf_decomposition(x):
    # x Phi(x), Phi(x) = 1 - erfc(z)/2 for z = x/sqrt(2) >= 0 and erfc(-z)/2
    # below. |z| is formed with where (not abs) so that its slope at 0 is 1.
    o = _ops()
    z = x * _INV_SQRT_2
    neg = _less(z, 0.0)
    e = _erfc_nonneg(o.where(neg, negate(z), z))
    return x * o.where(neg, e * 0.5, 1.0 - e * 0.5)
