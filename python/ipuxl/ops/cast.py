"""``cast`` between the element types the core supports, and the float8
casts with power-of-two scaling (PopXL's ``pow2scale_cast_to_fp8`` /
``pow2scale_cast_from_fp8``; ``pow2scale_then_cast`` / ``cast_then_pow2scale``
are their earlier names). Kernels: ``cpp/kernels/cast.cpp``, ``fp8.cpp``."""
from .. import dtypes
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .utils import ALL_DTYPES, FP8_DTYPES, check_dtype_in, check_in_graph

__all__ = ["cast", "pow2scale_cast_to_fp8", "pow2scale_cast_from_fp8", "pow2scale_then_cast",
           "cast_then_pow2scale"]


def _as_dtype(op: str, data_type) -> dtypes.dtype:
    try:
        return dtypes.dtype.as_dtype(data_type)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: data_type must be a popxl dtype, got {data_type!r}") from None


def cast(t: Tensor, data_type: dtypes.dtype) -> Tensor:
    """Cast ``t`` to ``data_type`` (a new tensor, also when the types are equal).

    Conversions are defined for every value: to bool is ``x != 0`` (NaN is
    True); float to integer truncates toward zero, saturates at the integer
    type's limits and maps NaN to 0; integer to integer wraps modulo 2**bits;
    bool to a number gives 0 or 1. A float8 tensor converts by value
    (unscaled). Casting *to* float8 raises ``TypeError`` as in PopXL: use
    :func:`pow2scale_cast_to_fp8`.

    Raises:
        TypeError: ``t`` is not a Tensor, or a dtype is not supported.
        ValueError: ``t`` is not in the current graph.
    """
    check_in_graph("cast", t=t)
    dt = _as_dtype("cast", data_type)
    if dt in FP8_DTYPES:
        raise TypeError(f"Data type {dt} not supported for cast, please consider "
                        "pow2scale_cast_to_fp8 or pow2scale_cast_from_fp8")
    if dt not in ALL_DTYPES:
        raise TypeError(f"cast: cannot cast to {dt.name}; supported: "
                        + ", ".join(d.name for d in ALL_DTYPES))
    check_dtype_in("cast", t, ALL_DTYPES + FP8_DTYPES)
    out = create_op("Cast", [t], [f"{t.name}_{dt.name}"], {"to": dt._core_code, "_to": dt},
                    name="cast")
    return out.outputs[0]


define_op("Cast", lambda ins, attrs, graphs=(): [(ins[0].shape, attrs["_to"])], cost="elementwise")


def _check_log2_scale(log2_scale: Tensor):
    if not isinstance(log2_scale, Tensor):
        raise TypeError(f"log2_scale must be a Tensor, got {type(log2_scale).__name__}")
    if log2_scale.rank > 0:
        raise ValueError("Log2 scale argument must be a scalar tensor")
    if log2_scale.dtype != dtypes.int32:
        raise TypeError("Log2 scale tensor must be of type popxl.int32")


def pow2scale_cast_to_fp8(t: Tensor, log2_scale: Tensor, data_type: dtypes.dtype) -> Tensor:
    """``cast(t * 2**log2_scale, data_type)`` fused: ``t`` float16 or float32,
    ``log2_scale`` an int32 scalar tensor (in [-32, 32), checked when the
    program runs), ``data_type`` ``float8_143`` or ``float8_152``. Rounds to
    nearest even; values beyond the format's range become NaN (see
    :mod:`ipuxl.fp8_utils` for the formats).

    Raises:
        TypeError: ``data_type`` is not float8, ``t`` not float16/float32 or
            ``log2_scale`` not int32.
        ValueError: ``log2_scale`` is not a scalar.
    """
    dt = _as_dtype("pow2scale_cast_to_fp8", data_type)
    if dt not in FP8_DTYPES:
        raise TypeError(f"Data type {dt} not supported for pow2scale_cast_to_fp8")
    _check_log2_scale(log2_scale)
    check_in_graph("pow2scale_cast_to_fp8", t=t, log2_scale=log2_scale)
    check_dtype_in("pow2scale_cast_to_fp8", t, (dtypes.float16, dtypes.float32))
    return create_op("Pow2ScaleThenCast", [t, log2_scale], [f"{t.name}_{dt.name}"], {"_to": dt},
                     name="pow2scale_cast_to_fp8").outputs[0]


def pow2scale_cast_from_fp8(t: Tensor, log2_scale: Tensor, data_type: dtypes.dtype) -> Tensor:
    """``cast(t, data_type) * 2**log2_scale`` fused: ``t`` float8,
    ``data_type`` float16 or float32 (exact for every fp8 value, rounded once
    when the scale leaves float16's range).

    Raises:
        TypeError: ``data_type`` is not float16/float32, ``t`` not float8 or
            ``log2_scale`` not int32.
        ValueError: ``log2_scale`` is not a scalar.
    """
    dt = _as_dtype("pow2scale_cast_from_fp8", data_type)
    if dt not in (dtypes.float16, dtypes.float32):
        raise TypeError(f"Data type {dt} not supported for pow2scale_cast_from_fp8")
    _check_log2_scale(log2_scale)
    check_in_graph("pow2scale_cast_from_fp8", t=t, log2_scale=log2_scale)
    check_dtype_in("pow2scale_cast_from_fp8", t, FP8_DTYPES)
    return create_op("CastThenPow2Scale", [t, log2_scale], [f"{t.name}_{dt.name}"], {"_to": dt},
                     name="pow2scale_cast_from_fp8").outputs[0]


_NO_FP8_GRAD = "float8 is not supported for training (as PopART)"
define_op("Pow2ScaleThenCast", lambda ins, attrs, graphs=(): [(ins[0].shape, attrs["_to"])],
          no_grad=_NO_FP8_GRAD, cost="elementwise")
define_op("CastThenPow2Scale", lambda ins, attrs, graphs=(): [(ins[0].shape, attrs["_to"])],
          no_grad=_NO_FP8_GRAD, cost="elementwise")

#: Earlier PopXL names of the two fp8 casts.
pow2scale_then_cast = pow2scale_cast_to_fp8
cast_then_pow2scale = pow2scale_cast_from_fp8


# ---- gradient rule
from ..grad import register_grad  # noqa: E402


@register_grad("Cast")
def _cast_grad(ctx):
    """The gradient is cast back to the input's dtype. Only float inputs of a
    float result get one (integer/bool tensors carry no gradient)."""
    g = ctx.g()
    src = ctx.op.inputs[0].dtype
    if not src.is_floating_point or g is None:
        return [None]
    return [g if g.dtype == src else cast(g, src)]
