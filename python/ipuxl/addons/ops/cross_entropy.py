"""Cross-entropy helpers of ``popxl_addons.ops.cross_entropy``.

As in popxl-addons, ``cross_entropy`` is ``softmax`` then ``ops.nll_loss``
(whose labels must have shape ``logits.shape[:-1]``) and
``cross_entropy_with_grad`` is ``softmax`` then
``ops.nll_loss_with_softmax_grad``, which takes one label per row of the
logits in any shape (``(n, 1)`` labels for ``(n, C)`` logits, as Graphcore's
BERT pretraining passes them).
"""
from typing import Optional, Tuple, Union

import numpy as np

from ...tensor import Tensor, constant
from ... import dtypes

__all__ = ["cross_entropy", "cross_entropy_with_grad"]


def _check(name: str, x, targets, any_shape: bool):
    if not isinstance(x, Tensor) or not isinstance(targets, Tensor):
        raise TypeError(f"{name}: logits and targets must be Tensors, got "
                        f"{type(x).__name__} and {type(targets).__name__}")
    if len(x.shape) < 1:
        raise ValueError(f"{name}: logits {x.id!r} must have rank >= 1 (classes on the last axis)")
    rows = tuple(x.shape[:-1])
    if any_shape:
        if targets.nelms != int(np.prod(rows, dtype=np.int64)):
            raise ValueError(f"{name}: targets {targets.id!r} {targets.shape} must hold one label "
                             f"per row of logits {x.id!r} {x.shape}, "
                             f"{int(np.prod(rows, dtype=np.int64))} in all")
    elif tuple(targets.shape) != rows:
        raise ValueError(f"{name}: targets {targets.id!r} must have shape logits.shape[:-1] = "
                         f"{rows}, got {targets.shape} (logits {x.id!r} {x.shape})")


def cross_entropy(x: Tensor, targets: Tensor, ignore_index: Optional[int] = None,
                  reduction: str = "mean") -> Tensor:
    """Cross entropy of logits ``x`` (``(*dims, C)``) against class indices
    ``targets`` (``(*dims)``), as a differentiable graph (``softmax`` then
    ``nll_loss``), reduced by ``reduction`` (``'mean'``, ``'sum'`` or
    ``'none'``). Items equal to ``ignore_index`` do not contribute."""
    from ... import ops

    _check("cross_entropy", x, targets, any_shape=False)
    return ops.nll_loss(ops.softmax(x, axis=-1), targets, ignore_index=ignore_index,
                        reduction=reduction)


def cross_entropy_with_grad(x: Tensor, targets: Tensor, loss_scaling: Union[float, Tensor] = 1,
                            ignore_index: Optional[int] = None,
                            reduction: str = "mean") -> Tuple[Tensor, Tensor]:
    """``(loss, dloss/dx)`` of the cross entropy of logits ``x``
    (``(*dims, C)``) and class indices ``targets`` (one per row of ``x``, in
    any shape), reduced by ``reduction``.

    ``dloss/dx`` is multiplied by ``loss_scaling`` (a float or a Tensor; use
    it against float16 underflow); the loss itself is not scaled. Items
    equal to ``ignore_index`` contribute neither to the loss nor to the
    gradient."""
    from ... import ops

    _check("cross_entropy_with_grad", x, targets, any_shape=True)
    probs = ops.softmax(x, axis=-1)
    if not isinstance(loss_scaling, Tensor):
        loss_scaling = constant(loss_scaling, dtypes.float32)
    return ops.nll_loss_with_softmax_grad(probs, targets, loss_scaling, ignore_index=ignore_index,
                                          reduction=reduction)
