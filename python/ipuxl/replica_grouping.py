"""``ReplicaGrouping``, mirroring ``popxl.ReplicaGrouping``."""
from typing import List

__all__ = ["ReplicaGrouping"]


class ReplicaGrouping:
    """How replicas are grouped for variables and collectives: replica ``r`` is
    in group ``(r // (stride * group_size)) * stride + r % stride``."""

    def __init__(self):
        raise TypeError("ReplicaGrouping cannot be constructed directly; use ir.replica_grouping")

    @classmethod
    def _from_ir(cls, ir, stride: int = 1, group_size=None):
        rf = ir.replication_factor
        if group_size is None:
            group_size = rf // stride if stride else 0
        if not isinstance(stride, int) or stride < 1:
            raise ValueError(f"stride must be a positive int, got {stride!r}")
        if not isinstance(group_size, int) or group_size < 1:
            raise ValueError(f"group_size must be a positive int, got {group_size!r}")
        if stride == 1 and rf % group_size != 0:
            raise ValueError(
                f"group_size {group_size} does not divide the replication factor {rf}")
        if stride != 1 and stride * group_size != rf:
            raise ValueError(
                f"stride {stride} * group_size {group_size} must equal the replication factor {rf}")
        self = object.__new__(cls)
        self._ir = ir
        self._stride = stride
        self._group_size = group_size
        return self

    @property
    def stride(self) -> int:
        return self._stride

    @property
    def group_size(self) -> int:
        return self._group_size

    @property
    def num_groups(self) -> int:
        return self._ir.replication_factor // self._group_size

    @property
    def is_const(self) -> bool:
        return True

    @property
    def assignment(self) -> List[int]:
        rf = self._ir.replication_factor
        s, g = self._stride, self._group_size
        return [(r // (s * g)) * s + r % s for r in range(rf)]

    def transpose(self) -> "ReplicaGrouping":
        rf = self._ir.replication_factor
        if self._stride == 1:
            return ReplicaGrouping._from_ir(self._ir, self._group_size, rf // self._group_size)
        return ReplicaGrouping._from_ir(self._ir, 1, self._stride)

    def __eq__(self, other):
        return isinstance(other, ReplicaGrouping) and other._ir is self._ir and \
            (other.stride, other.group_size) == (self.stride, self.group_size)

    def __hash__(self):
        return hash((self._stride, self._group_size))

    def __repr__(self):
        return (f"ReplicaGrouping(num_replicas={self._ir.replication_factor}, "
                f"stride={self._stride}, group_size={self._group_size}, "
                f"num_groups={self.num_groups})")
