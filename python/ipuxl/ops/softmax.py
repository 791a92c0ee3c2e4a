"""``softmax`` along one axis, mirroring PopXL (PopXL has no log_softmax)."""
from ..grad import register_decomposition, register_grad
from ..op import create_op
from ..opdef import define_op
from ..tensor import Tensor
from .rules import like_input
from .utils import FLOAT_DTYPES, check_dtype_in, check_in_graph, normalize_axis

__all__ = ["softmax"]


def softmax(t: Tensor, axis: int) -> Tensor:
    """Softmax of ``t`` along ``axis`` (negative counts from the end): each
    slice is rescaled to values in [0, 1] that sum to 1. Output shape and
    dtype match ``t`` (floating-point only).

    Computed stably as ``exp(x - max) / sum(exp(x - max))``; float16 computes
    in float. A slice containing NaN or +inf gives NaN (as PyTorch).
    """
    name = "softmax"
    check_in_graph(name, t=t)
    check_dtype_in(name, t, FLOAT_DTYPES)
    if t.rank == 0:
        raise ValueError(f"{name}: tensor {t.id!r} has rank 0; the input rank must be at least 1")
    ax = normalize_axis(name, axis, t.rank)
    op = create_op("Softmax", [t], [f"{name}_out"], {"axis": ax}, name=name)
    return op.outputs[0]


define_op("Softmax", like_input(0), cost="softmax")


define_op("SoftmaxGrad", like_input(0), cost="softmax")


@register_grad("Softmax")
def _softmax_grad(ctx):
    """``SoftmaxGrad(g, y)`` (PopART's SoftmaxGradOp): ``dx = y * (g -
    sum(g * y, axis))`` in one kernel. Its value, for differentiating it
    again, is :func:`_softmax_grad_decomposition`."""
    return [create_op("SoftmaxGrad", [ctx.g(), ctx.y()], ["softmax_grad_out"],
                      {"axis": ctx.attrs["axis"]}, name="softmax_grad").outputs[0]]


@register_decomposition("SoftmaxGrad")
def _softmax_grad_decomposition(op, g, y):
    """``y * (g - sum(g * y, axis))`` from ordinary ops."""
    from .. import ops

    dot = ops.sum(g * y, axis=op.attrs["axis"], keepdims=True)
    return [y * (g - dot)]
