"""Replicated tensor sharding (RTS): how a tensor is split over replicas.

One small set of functions, shared by remote RTS variables (their shards in
remote buffers) and the replication code (``replica_sharded_variable``,
``replica_sharded_slice``, reduce-scatter / all-gather layouts), so that
both agree on where each element goes.

The rule PopXL documents: the tensor is flattened (C order), zero-padded to
a multiple of the number of shards ``n``, and split into ``n`` contiguous
shards of ``ceil(nelms / n)`` elements; shard ``k`` belongs to the replica
of rank ``k`` in its sharding group (the group's replicas in ascending
order). With ``shard_over`` smaller than a variable's replica group, the
group's members ``0 .. shard_over-1`` hold one copy of the shards,
``shard_over .. 2*shard_over-1`` the next, and so on: member ``m`` holds
shard ``m % shard_over``. (Poplar stores shards in a collective-friendly
rearranged order, "CBR"; the contiguous order here differs from it only
when a shard itself is host_store'd.)
"""
from typing import List, Sequence, Tuple

import numpy as np

__all__ = ["shard_size", "shard", "unshard", "shard_rank", "group_members"]


def shard_size(nelms: int, num_shards: int) -> int:
    """Elements per shard: ``ceil(nelms / num_shards)``."""
    if num_shards < 1:
        raise ValueError(f"the number of shards must be positive, got {num_shards}")
    return -(-int(nelms) // int(num_shards))


def shard(data: np.ndarray, num_shards: int) -> np.ndarray:
    """``data`` as ``(num_shards, shard_size)``: flattened, zero-padded."""
    flat = np.ascontiguousarray(data).reshape(-1)
    size = shard_size(flat.size, num_shards)
    out = np.zeros((num_shards, size), dtype=flat.dtype)
    out.reshape(-1)[:flat.size] = flat
    return out


def unshard(shards: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """The tensor of ``shape`` whose shards are the rows of ``shards``
    (padding dropped)."""
    shape = tuple(int(d) for d in shape)
    n = 1
    for d in shape:
        n *= d
    return np.ascontiguousarray(shards).reshape(-1)[:n].reshape(shape).copy()


def group_members(assignment: Sequence[int]) -> List[List[int]]:
    """The replicas of each group, in ascending order (index: group)."""
    groups: List[List[int]] = [[] for _ in range(max(assignment, default=-1) + 1)]
    for r, g in enumerate(assignment):
        groups[g].append(r)
    return groups


def shard_rank(replica: int, assignment: Sequence[int], shard_over: int) -> Tuple[int, int]:
    """``(group, shard)``: the variable group of ``replica`` and the shard
    it holds (its rank in the group modulo ``shard_over``)."""
    g = assignment[replica]
    rank = group_members(assignment)[g].index(replica)
    return g, rank % shard_over
