"""``popxl_addons.seed_variable``: a random seed per replica group.

As popxl_addons: the seeds live in a remote variable (one value per group of
``replica_grouping``, default: one group per replica), loaded into an
on-chip tensor by ``weights_from_host`` and stored back by
``weights_to_host``, so ``Session.get_tensor_data`` / ``write_variable_data``
read and set the seed of every group.
"""
from typing import Optional, Tuple

from .. import ops
from ..context import _execution_context, gcg, get_main_graph
from ..random_seed import create_seeds
from ..remote_buffer import remote_buffer
from ..replica_grouping import ReplicaGrouping
from ..tensor import Tensor, Variable, remote_variable
from .. import dtypes

__all__ = ["seed_variable"]


def seed_variable(seed: int, replica_grouping: Optional[ReplicaGrouping] = None
                  ) -> Tuple[Variable, Tensor]:
    """A seed variable and the on-chip seed tensor (uint32 ``(2,)``) to pass to
    random ops: replicas of one group of ``replica_grouping`` share a seed,
    groups get ``create_seeds(seed, replicas=num_groups)``'s values."""
    ir = gcg().ir
    replica_grouping = replica_grouping or ir.replica_grouping(group_size=1)
    initial = create_seeds(seed, replicas=replica_grouping.num_groups)
    buffer = remote_buffer((2,), dtypes.uint32)
    seed_var = remote_variable(initial, buffer, replica_grouping=replica_grouping,
                               name="random_seed")
    with get_main_graph():
        with _execution_context("weights_from_host"):
            seed_t = ops.remote_load(buffer, 0, "random_seed_h2d")
        with _execution_context("weights_to_host"):
            ops.remote_store(buffer, 0, seed_t)
    return seed_var, seed_t
