"""``ReplicaGrouping``, mirroring ``popxl.ReplicaGrouping``.

A grouping partitions the ``ir.replication_factor`` replicas into groups of
equal size. ``ir.replica_grouping(stride, group_size)`` makes a grouping
with a constant stride: each group is ``group_size`` replicas ``stride``
apart, and groups are numbered in the order of their first replica, so
replica ``r`` is in group ``(r // (stride * group_size)) * stride + r % stride``
(8 replicas, stride 2, group size 2: ``[0, 1, 0, 1, 2, 3, 2, 3]``).
``ir.replica_grouping_from_assignments(assignment)`` accepts any equal-size
partition; when no ``(stride, group_size)`` describes it, the grouping is
"non-constant": it can hold grouped variables but not drive collectives,
``stride`` raises ``NotImplementedError``, and ``const_rg`` is the constant
grouping with the fewest groups whose every group lies inside one group of
it (``to_device_map`` / ``to_host_map`` relate the two numberings).
"""
from typing import TYPE_CHECKING, List, Optional, Sequence, Tuple

if TYPE_CHECKING:
    from .ir import Ir

__all__ = ["ReplicaGrouping"]


def _const_assignment(num_replicas: int, stride: int, group_size: int) -> List[int]:
    block = stride * group_size
    return [(r // block) * stride + r % stride for r in range(num_replicas)]


def _valid_const(num_replicas: int, stride: int, group_size: int) -> bool:
    return stride >= 1 and group_size >= 1 and num_replicas % (stride * group_size) == 0


class ReplicaGrouping:
    """How replicas are grouped for variables and collectives (see the
    module docstring). Made by ``ir.replica_grouping`` or
    ``ir.replica_grouping_from_assignments``."""

    def __init__(self):
        raise RuntimeError(
            "popxl.ReplicaGrouping cannot be constructed directly (use `ir.replica_grouping`).")

    # ---- construction
    @classmethod
    def _make(cls, ir: "Ir", assignment: List[int], stride: Optional[int]) -> "ReplicaGrouping":
        self = object.__new__(cls)
        self._ir = ir
        self._num_replicas = len(assignment)
        self._assignment = list(assignment)
        self._num_groups = max(assignment) + 1 if assignment else 0
        self._group_size = self._num_replicas // self._num_groups if self._num_groups else 0
        self._stride = stride
        if stride is not None:
            self.const_rg = self
            self.to_device_map = None
            self.to_host_map = None
        else:
            self.const_rg = self._finest_const_cover()
            self.to_device_map, self.to_host_map = self._maps(self.const_rg)
        return self

    @classmethod
    def _from_params(cls, ir: "Ir", stride: int = 1,
                     group_size: Optional[int] = None) -> "ReplicaGrouping":
        n = ir.replication_factor
        if not isinstance(stride, int) or isinstance(stride, bool) or not 0 < stride <= n:
            raise ValueError(
                "Stride must be greater than zero and less than or equal to number of replicas. "
                f"Stride: {stride}. Replicas: {n}")
        if n % stride:
            raise ValueError("Stride must be a factor of the number of replicas. "
                             f"Stride: {stride}. Replicas: {n}")
        if group_size is None:
            group_size = n // stride
        if not isinstance(group_size, int) or isinstance(group_size, bool) \
                or not 0 < group_size <= n:
            raise ValueError(
                "Group size must be greater than zero and less than or equal to number of "
                f"replicas. Group size: {group_size}. Replicas: {n}")
        if group_size == 1:
            stride = 1  # a group of one replica has no stride
        if not _valid_const(n, stride, group_size):
            raise ValueError(
                f"stride {stride} and group_size {group_size} do not partition {n} replicas: "
                f"stride * group_size ({stride * group_size}) must divide the number of replicas")
        return cls._make(ir, _const_assignment(n, stride, group_size), stride)

    # The name earlier ipuxl code used.
    _from_ir = _from_params

    @classmethod
    def _from_assignment(cls, ir: "Ir", assignment: Sequence[int]) -> "ReplicaGrouping":
        n = ir.replication_factor
        assignment = [int(a) for a in assignment]
        if len(assignment) != n:
            raise ValueError(f"The length of `assignment` ({len(assignment)}) does not equal the "
                             f"number of replicas ({n}).")
        groups = sorted(set(assignment))
        sizes = [assignment.count(g) for g in groups]
        if len(set(sizes)) != 1:
            raise ValueError("All groups should have the same size but they dont. "
                             f"(Group, Sizes): {list(zip(groups, sizes))}")
        if groups != list(range(len(groups))):
            raise ValueError("The group numbers are not numbered consecutively and/or do not "
                             f"start at 0. Groups: {groups}")
        first_seen = list(dict.fromkeys(assignment))
        if first_seen != groups:
            raise ValueError("When ordered by first appearance, the group numbers are not "
                             f"monotonically increasing. Ordering: {first_seen}")
        group_size = sizes[0]
        members = [r for r, g in enumerate(assignment) if g == 0]
        stride = members[1] - members[0] if group_size > 1 else 1
        if _valid_const(n, stride, group_size) and \
                _const_assignment(n, stride, group_size) == assignment:
            return cls._make(ir, assignment, stride)
        return cls._make(ir, assignment, None)

    def _finest_const_cover(self) -> "ReplicaGrouping":
        """The constant grouping with the fewest groups such that each of its
        groups lies inside one group of ``self`` (ties: the smaller stride)."""
        n = self._num_replicas
        best = None
        for g in range(self._group_size, 0, -1):
            if self._group_size % g:
                continue
            for s in range(1, n + 1):
                if not _valid_const(n, s, g) or (g == 1 and s != 1):
                    continue
                const = _const_assignment(n, s, g)
                owner = {}
                if all(owner.setdefault(c, a) == a for c, a in zip(const, self._assignment)):
                    best = (s, g, const)
                    break
            if best:
                break
        s, g, const = best
        return ReplicaGrouping._make(self._ir, const, s)

    def _maps(self, const: "ReplicaGrouping") -> Tuple[List[int], List[int]]:
        to_device = [None] * const.num_groups   # const group -> group of self
        to_host = [None] * self._num_groups     # group of self -> its first const group
        for c, a in zip(const.assignment, self._assignment):
            if to_device[c] is None:
                to_device[c] = a
            if to_host[a] is None:
                to_host[a] = c
        return to_device, to_host

    # ---- properties
    @property
    def stride(self) -> int:
        """The distance between consecutive replicas of a group.

        Raises:
            NotImplementedError: for a grouping with a non-constant stride.
        """
        if self._stride is None:
            raise NotImplementedError(
                "This ReplicaGrouping has a non-constant stride and has no constant-stride "
                "representation. You can't use this ReplicaGrouping with collective ops.")
        return self._stride

    @property
    def group_size(self) -> int:
        return self._group_size

    @property
    def num_groups(self) -> int:
        return self._num_groups

    @property
    def assignment(self) -> List[int]:
        """The group of each replica (index: replica)."""
        return list(self._assignment)

    @property
    def is_const(self) -> bool:
        """Whether a ``(stride, group_size)`` pair describes this grouping."""
        return self._stride is not None

    def transpose(self) -> "ReplicaGrouping":
        """The grouping whose ``k``-th group holds the ``k``-th replica of every
        group of this one (8 replicas: ``[0, 1, 0, 1, 2, 3, 2, 3]`` becomes
        ``[0, 0, 1, 1, 0, 0, 1, 1]``; ``[0, 0, 1, 1]`` becomes ``[0, 1, 0, 1]``)."""
        members = [[] for _ in range(self._num_groups)]
        for r, g in enumerate(self._assignment):
            members[g].append(r)
        new = [0] * self._num_replicas
        for group in members:
            for k, r in enumerate(group):
                new[r] = k
        return ReplicaGrouping._from_assignment(self._ir, new)

    # ---- comparison and display
    def __eq__(self, other) -> bool:
        if not isinstance(other, ReplicaGrouping):
            raise TypeError("Value must be of type popxl.ReplicaGrouping. "
                            f"Type: {type(other)}. Value: {other}.")
        return self._ir is other._ir and self._assignment == other._assignment

    def __ne__(self, other) -> bool:
        return not self == other

    def __hash__(self):
        return hash(tuple(self._assignment))

    def __repr__(self) -> str:
        if self.is_const:
            return (f"ReplicaGrouping(num_replicas={self._num_replicas}, stride={self._stride}, "
                    f"group_size={self._group_size}, num_groups={self._num_groups})")
        return f"ReplicaGrouping(assignment={self._assignment})"
