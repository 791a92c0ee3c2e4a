"""``NamedReplicaGrouping``: a ``DotTree`` of ReplicaGroupings."""
from typing import List, Optional

from ..replica_grouping import ReplicaGrouping
from .dot_tree import DotTree

__all__ = ["NamedReplicaGrouping", "fill_none_group", "get_instance_replica_grouping",
           "is_cross_instance", "get_ild_size_from_popdist", "is_cross_ild",
           "get_ild_replica_grouping"]


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


# -- IPU Link Domains ---------------------------------------------------------
# An IPU Link Domain (ILD) is the set of IPUs joined by IPU-Links (64 on a
# POD64); collectives within one are cheaper than across. popxl-addons reads
# its size from Poplar's target options, as ``poprun`` sets them.

_warned_assumed_ild_size = False


def _poplar_target_options() -> dict:
    """Poplar's target options (poprun sets ``ipuLinkDomainSize`` there)."""
    from .. import settings

    return settings.poplar_target_options()


def get_ild_size_from_popdist() -> int:
    """The IPU Link Domain size: ``ipuLinkDomainSize`` of
    ``POPLAR_TARGET_OPTIONS``, else the replication factor of the current Ir
    capped at 64 (warning once when popdist is in use, as popxl-addons)."""
    global _warned_assumed_ild_size
    from ..context import gcg

    size = _poplar_target_options().get("ipuLinkDomainSize")
    if size is not None:
        try:
            size = int(size)
        except (TypeError, ValueError):
            raise ValueError(f"POPLAR_TARGET_OPTIONS: ipuLinkDomainSize must be an integer, got "
                             f"{size!r}") from None
        if size < 1:
            raise ValueError(f"POPLAR_TARGET_OPTIONS: ipuLinkDomainSize must be positive, got {size}")
        return size
    size = min(gcg().ir.replication_factor, 64)
    from .. import popdist

    if not _warned_assumed_ild_size and popdist.isPopdistEnvSet():
        import logging

        _warned_assumed_ild_size = True
        logging.warning(f"Could not read IPU link domain size from enviroment. Assuming {size}.")
    return size


def is_cross_ild(replica_grouping: ReplicaGrouping) -> bool:
    """Whether the grouping's groups span more replicas than one IPU Link Domain."""
    return replica_grouping.group_size * replica_grouping.stride > get_ild_size_from_popdist()


def get_ild_replica_grouping(replica_grouping: Optional[ReplicaGrouping] = None) -> ReplicaGrouping:
    """The grouping restricted to one IPU Link Domain: the same stride, and
    only the replicas of an ILD in each group (``group_size = ild_size //
    stride``) when its groups span more; otherwise the grouping itself.
    ``None`` means all replicas of the current Ir."""
    from ..context import gcg

    ir = gcg().ir
    rg = replica_grouping or ir.replica_grouping()
    ild_size = get_ild_size_from_popdist()
    if rg.stride > ild_size:
        raise ValueError(f"replica grouping stride must be < IPU Link Domain size ({ild_size}), "
                         f"got stride {rg.stride}")
    if is_cross_ild(rg):
        return ir.replica_grouping(stride=rg.stride, group_size=ild_size // rg.stride)
    return rg
