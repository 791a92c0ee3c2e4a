"""``cast`` between the element types the core supports, and the fp8 scaling
casts (which ipuxl cannot run)."""
from .. import dtypes
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .utils import ALL_DTYPES, check_dtype_in, check_in_graph

__all__ = ["cast", "pow2scale_then_cast", "cast_then_pow2scale"]


def _as_core_dtype(op: str, data_type) -> dtypes.dtype:
    try:
        dt = dtypes.dtype.as_dtype(data_type)
    except (TypeError, ValueError):
        raise TypeError(f"{op}: data_type must be a popxl dtype, got {data_type!r}") from None
    if dt in (dtypes.float8_143, dtypes.float8_152):
        raise NotImplementedError(f"{op}: casting to {dt.name} (fp8) is not supported by ipuxl")
    if dt not in ALL_DTYPES:
        raise TypeError(f"{op}: cannot cast to {dt.name}; supported: "
                        + ", ".join(d.name for d in ALL_DTYPES))
    return dt


def cast(t: Tensor, data_type: dtypes.dtype) -> Tensor:
    """Cast ``t`` to ``data_type`` (a new tensor, also when the types are equal).

    Conversions are defined for every value: to bool is ``x != 0`` (NaN is
    True); float to integer truncates toward zero, saturates at the integer
    type's limits and maps NaN to 0; integer to integer wraps modulo 2**bits;
    bool to a number gives 0 or 1. fp8 types raise ``NotImplementedError``.

    Raises:
        TypeError: ``t`` is not a Tensor, or a dtype is not supported.
        ValueError: ``t`` is not in the current graph.
    """
    check_in_graph("cast", t=t)
    dt = _as_core_dtype("cast", data_type)
    if t.dtype in (dtypes.float8_143, dtypes.float8_152):
        raise NotImplementedError(
            f"cast: casting from {t.dtype.name} (fp8) is not supported by ipuxl")
    check_dtype_in("cast", t, ALL_DTYPES)
    out = create_op("Cast", [t], [f"{t.name}_{dt.name}"], {"to": dt._core_code, "_to": dt},
                    name="cast")
    return out.outputs[0]


define_op("Cast", lambda ins, attrs, graphs=(): [(ins[0].shape, attrs["_to"])])


def pow2scale_then_cast(t: Tensor, log2_scale: Tensor, data_type: dtypes.dtype) -> Tensor:
    """Scale by ``2**log2_scale`` then cast to an fp8 type (PopXL). ipuxl has no
    fp8 support, so this raises ``NotImplementedError``."""
    raise NotImplementedError("pow2scale_then_cast: fp8 casts are not supported by ipuxl")


def cast_then_pow2scale(t: Tensor, log2_scale: Tensor, data_type: dtypes.dtype) -> Tensor:
    """Cast from an fp8 type then scale by ``2**log2_scale`` (PopXL). ipuxl has
    no fp8 support, so this raises ``NotImplementedError``."""
    raise NotImplementedError("cast_then_pow2scale: fp8 casts are not supported by ipuxl")


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
