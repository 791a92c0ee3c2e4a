"""``popxl_addons.ops.grad_reduce_square_add``: the sum of squares of a
loss-scaled gradient, unscaled — the squared-norm term of gradient clipping.

popxl-addons implements it as a custom op (``popops::reduce`` with
``SQUARE_ADD`` and a scale, float32 result). Here it is the same
computation from popxl ops: ``ops.lamb_square`` (every element squared and
summed, accumulated in float32, a float32 scalar) times
``1 / loss_scaling**2``.
"""
from typing import Union

from ... import dtypes
from ...tensor import Tensor, constant

__all__ = ["grad_reduce_square_add"]


def grad_reduce_square_add(t: Tensor, loss_scaling: Union[int, float, Tensor]) -> Tensor:
    """``sum(t**2) / loss_scaling**2`` as a float32 scalar (``t`` float16 or
    float32; ``loss_scaling`` a number or a scalar Tensor)."""
    from ... import ops

    if not isinstance(t, Tensor):
        raise TypeError(f"grad_reduce_square_add: t must be a Tensor, got {type(t).__name__}")
    if isinstance(loss_scaling, Tensor):
        ls = ops.cast(loss_scaling, dtypes.float32) if loss_scaling.dtype != dtypes.float32 \
            else loss_scaling
        scale = 1 / (ls * ls)
    else:
        if isinstance(loss_scaling, bool) or not isinstance(loss_scaling, (int, float)) or \
                loss_scaling == 0:
            raise ValueError(f"grad_reduce_square_add: loss_scaling must be a non-zero number or "
                             f"a Tensor, got {loss_scaling!r}")
        scale = constant(1 / (loss_scaling * loss_scaling), dtypes.float32)
    return ops.lamb_square(t) * scale
