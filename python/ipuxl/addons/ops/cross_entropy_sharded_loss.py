"""``popxl_addons.ops.cross_entropy_sharded_loss``: the cross-entropy of
tensor parallelism, the logits sharded along the class axis over the
replicas of a group.

Each member holds ``logits`` ``(n_samples, n_classes / group_size)`` (its
own classes) and the same ``indices``, already shifted by the member's first
class (an index outside ``[0, n_classes_local)`` is another member's class).
Built from ops and collectives, as popxl_addons' custom op computes it:

* ``m = all_reduce_max(max(logits, 1))``, the stabilising shift (detached:
  the loss does not depend on it);
* ``loss = log(all_reduce(sum(exp(logits - m), 1))) - all_reduce(picked)``,
  ``picked`` the member's ``logits - m`` at its index (0 where the index is
  another member's).

The sums are reduced with ``replicated_all_reduce_identical_grad_inputs``:
the loss is the same on every member, so the gradient arriving at each
reduction is too, and the gradient of each member's logits is its own
``softmax - onehot`` (an ordinary all-reduce would sum the identical
gradients, ``group_size`` times too large).
"""
from typing import Optional

import numpy as np

from ... import dtypes, ops
from ...ops import collectives as _c
from ...ops.utils import check_in_graph, check_tensor_ipu_and_tile_set
from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor, constant
from .replicated_all_reduce_TP import replicated_all_reduce_identical_grad_inputs

__all__ = ["cross_entropy_sharded_loss"]

_REDUCTIONS = ("mean", "sum", "none")


def cross_entropy_sharded_loss(logits: Tensor, indices: Tensor,
                               ignore_index: Optional[Tensor] = None,
                               replica_grouping: Optional[ReplicaGrouping] = None,
                               reduction: str = "mean",
                               available_memory_proportion: float = 0.4) -> Tensor:
    """Cross-entropy of logits sharded along the class axis over the
    replicas of ``replica_grouping`` (default: all replicas).

    Args:
        logits: ``(n_samples, sharded_n_classes)``, this member's classes.
        indices: ``(n_samples,)`` integer labels, shifted by this member's
            first class.
        ignore_index: labels (shifted as ``indices``) that contribute
            neither to the loss nor to the gradient.
        replica_grouping: the tensor-parallel group (stride 1 in
            popxl_addons; any constant stride here).
        reduction: ``"mean"`` (over the samples not ignored), ``"sum"`` or
            ``"none"``.
        available_memory_proportion: a Poplar planning option of the
            custom op; accepted and unused.

    Returns:
        The loss, identical on every member: ``(n_samples,)`` for
        ``"none"``, a scalar otherwise.
    """
    what = "cross_entropy_sharded_loss"
    check_in_graph(what, logits=logits, indices=indices)
    check_tensor_ipu_and_tile_set(logits=logits, indices=indices)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"`reduction` should be one of `mean`, `sum` and `none`. Passed: "
                         f"{reduction}")
    if logits.rank != 2:
        raise ValueError(f"{what}: logits {logits.id!r} must have shape (n_samples, "
                         f"sharded_n_classes), got {logits.shape}")
    if logits.dtype not in (dtypes.float16, dtypes.float32):
        raise TypeError(f"{what}: logits {logits.id!r} must be float16 or float32, got "
                        f"{logits.dtype}")
    if not indices.dtype.is_int or tuple(indices.shape) != (logits.shape[0],):
        raise ValueError(f"{what}: indices {indices.id!r} must be integers of shape "
                         f"({logits.shape[0]},), got {indices.dtype} {indices.shape}")
    group = _c._grouping(what, replica_grouping)
    n, classes = logits.shape

    shift = _c.replicated_all_reduce(ops.max(ops.detach(logits), axis=1), "max", group)
    shifted = logits - ops.detach(shift).reshape((n, 1))
    denominator = replicated_all_reduce_identical_grad_inputs(
        ops.sum(ops.exp(shifted), axis=1), "add", group)
    local = ops.cast(indices, dtypes.int32).reshape((n, 1))
    cls = constant(np.arange(classes, dtype=np.int32), dtypes.int32)
    onehot = ops.cast(ops.equal(local, cls), logits.dtype)
    picked = replicated_all_reduce_identical_grad_inputs(
        ops.sum(onehot * shifted, axis=1), "add", group)
    loss = ops.log(denominator) - picked

    if ignore_index is not None:
        mask = ops.cast(ops.logical_not(ops.equal(indices, ignore_index)), loss.dtype)
        loss = loss * mask
    if reduction == "mean" and ignore_index is not None:
        loss = ops.sum(loss) / ops.sum(mask)
    elif reduction == "mean":
        loss = ops.mean(loss)
    elif reduction == "sum":
        loss = ops.sum(loss)
    return loss
