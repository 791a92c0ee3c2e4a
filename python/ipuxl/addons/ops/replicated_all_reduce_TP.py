"""``popxl_addons.ops.replicated_all_reduce_TP``: the all-reduces of tensor
parallelism, where a tensor is either identical on the replicas of a group
or sharded over them.

* ``replicated_all_reduce_identical_inputs(t)``: the inputs are identical,
  so the forward is an identity; the gradient is the all-reduce.
* ``replicated_all_reduce_identical_grad_inputs(t)``: the forward reduces;
  the gradients arriving are identical on every member (the loss after the
  reduction is the same on all), so the gradient is an identity.
* ``replicated_all_reduce(t)``: both ways an all-reduce.

They are the ops of :mod:`.replicated_strided_collectives` (any
constant-stride grouping) under popxl_addons' names for this module.
"""
from typing import Optional

from ...ops import collectives as _c
from ...replica_grouping import ReplicaGrouping
from ...tensor import Tensor
from .replicated_strided_collectives import (
    replicated_all_reduce_strided_identical_grad_inputs,
    replicated_all_reduce_strided_identical_inputs)

__all__ = ["replicated_all_reduce_identical_inputs",
           "replicated_all_reduce_identical_grad_inputs", "replicated_all_reduce"]


def replicated_all_reduce_identical_inputs(t: Tensor, op: str = "add",
                                           group: Optional[ReplicaGrouping] = None) -> Tensor:
    """An identity whose gradient is the all-reduce of the gradients over
    ``group`` (default: all replicas)."""
    return replicated_all_reduce_strided_identical_inputs(t, op, group)


def replicated_all_reduce_identical_grad_inputs(t: Tensor, op: str = "add",
                                                group: Optional[ReplicaGrouping] = None
                                                ) -> Tensor:
    """The all-reduce of ``t`` over ``group``, whose gradient is an identity."""
    return replicated_all_reduce_strided_identical_grad_inputs(t, op, group)


def replicated_all_reduce(t: Tensor, op: str = "add",
                          group: Optional[ReplicaGrouping] = None) -> Tensor:
    """The all-reduce of ``t`` over ``group``; its gradient is the all-reduce
    of the gradients (``op`` ``"add"`` or ``"mean"`` to differentiate)."""
    return _c.replicated_all_reduce(t, op, group)
