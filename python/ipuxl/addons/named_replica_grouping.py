"""``NamedReplicaGrouping``: a ``DotTree`` of ReplicaGroupings."""
from typing import List, Optional

from ..replica_grouping import ReplicaGrouping
from .dot_tree import DotTree

__all__ = ["NamedReplicaGrouping", "fill_none_group", "get_instance_replica_grouping",
           "is_cross_instance"]


def fill_none_group(rg: Optional[ReplicaGrouping], none_value: ReplicaGrouping) -> ReplicaGrouping:
    return none_value if rg is None else rg


class NamedReplicaGrouping(DotTree[ReplicaGrouping]):
    """A ``DotTree`` collection of ReplicaGroupings."""

    @classmethod
    def build_groups(cls, names: List[str], value: Optional[ReplicaGrouping] = None):
        """Every name mapped to ``value`` (default: all replicas of the current Ir)."""
        from ..context import gcg

        value = value or gcg().ir.replica_grouping()
        return cls.pack(list(names), [value] * len(list(names)))


def is_cross_instance(replica_grouping: ReplicaGrouping) -> bool:
    from ..context import gcg

    ir = gcg().ir
    return replica_grouping.group_size * replica_grouping.stride > ir.instance_replication_factor


def get_instance_replica_grouping(replica_grouping: Optional[ReplicaGrouping] = None) -> ReplicaGrouping:
    """The grouping restricted to one instance (ipuxl runs a single instance,
    so this is the grouping itself unless it spans more replicas than exist)."""
    from ..context import gcg

    ir = gcg().ir
    rg = replica_grouping or ir.replica_grouping()
    if rg.stride > ir.instance_replication_factor:
        raise ValueError("replica grouping stride must be <= ir.instance_replication_factor")
    if is_cross_instance(rg):
        return ir.replica_grouping(stride=rg.stride,
                                   group_size=ir.instance_replication_factor // rg.stride)
    return rg
