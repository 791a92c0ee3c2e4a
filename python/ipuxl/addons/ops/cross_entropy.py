"""Cross-entropy helpers of ``popxl_addons.ops.cross_entropy``."""
from typing import Optional, Tuple, Union

from ...tensor import Tensor, constant
from ... import dtypes

__all__ = ["cross_entropy", "cross_entropy_with_grad"]


def _check(name: str, x, targets):
    if not isinstance(x, Tensor) or not isinstance(targets, Tensor):
        raise TypeError(f"{name}: logits and targets must be Tensors, got "
                        f"{type(x).__name__} and {type(targets).__name__}")
    if len(x.shape) < 1 or tuple(targets.shape) != tuple(x.shape[:-1]):
        raise ValueError(f"{name}: targets {targets.id!r} must have shape logits.shape[:-1] = "
                         f"{tuple(x.shape[:-1])}, got {targets.shape} (logits {x.id!r} {x.shape})")


def cross_entropy(x: Tensor, targets: Tensor, ignore_index: Optional[int] = None) -> Tensor:
    """Mean cross entropy of logits ``x`` (``(*dims, C)``) against class
    indices ``targets`` (``(*dims)``), as a differentiable graph
    (``softmax`` then ``nll_loss``). Items equal to ``ignore_index`` do not
    contribute."""
    from ... import ops

    _check("cross_entropy", x, targets)
    return ops.nll_loss(ops.softmax(x, axis=-1), targets, ignore_index=ignore_index)


def cross_entropy_with_grad(x: Tensor, targets: Tensor, loss_scaling: Union[float, Tensor] = 1,
                            ignore_index: Optional[int] = None) -> Tuple[Tensor, Tensor]:
    """``(loss, dloss/dx)`` of the mean cross entropy of logits ``x``
    (``(*dims, C)``) and class indices ``targets`` (``(*dims)``).

    ``dloss/dx`` is multiplied by ``loss_scaling`` (a float or a Tensor; use
    it against float16 underflow); the loss itself is not scaled. Items
    equal to ``ignore_index`` contribute neither to the loss nor to the
    gradient."""
    from ... import ops

    _check("cross_entropy_with_grad", x, targets)
    probs = ops.softmax(x, axis=-1)
    if not isinstance(loss_scaling, Tensor):
        loss_scaling = constant(loss_scaling, dtypes.float32)
    return ops.nll_loss_with_softmax_grad(probs, targets, loss_scaling, ignore_index=ignore_index)
