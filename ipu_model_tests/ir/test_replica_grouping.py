"""ReplicaGrouping against PopXL's documented examples (the assignments in
``Ir.replica_grouping``'s and ``ReplicaGrouping.transpose``'s docstrings)
and against a brute-force definition of a constant-stride group."""
import itertools

import pytest

import ipuxl as popxl


def _ir(n):
    ir = popxl.Ir()
    ir.replication_factor = n
    return ir


def _groups_by_definition(n, stride, group_size):
    """Groups as sets: each is group_size replicas stride apart, the first
    starting at the smallest replica not yet taken."""
    left, groups = list(range(n)), []
    while left:
        g = [left[0] + k * stride for k in range(group_size)]
        assert all(r in left for r in g)
        groups.append(g)
        left = [r for r in left if r not in g]
    out = [None] * n
    for i, g in enumerate(groups):
        for r in g:
            out[r] = i
    return out


@pytest.mark.parametrize("stride,group_size,assignment", [
    (1, 8, [0, 0, 0, 0, 0, 0, 0, 0]),
    (1, 1, [0, 1, 2, 3, 4, 5, 6, 7]),
    (1, 2, [0, 0, 1, 1, 2, 2, 3, 3]),
    (2, 2, [0, 1, 0, 1, 2, 3, 2, 3]),   # stride 2 x group size 2 on 8 replicas is valid
    (1, 4, [0, 0, 0, 0, 1, 1, 1, 1]),
    (2, 4, [0, 1, 0, 1, 0, 1, 0, 1]),
])
def test_documented_assignments(stride, group_size, assignment):
    rg = _ir(8).replica_grouping(stride=stride, group_size=group_size)
    assert rg.assignment == assignment
    assert rg.stride == stride and rg.group_size == group_size
    assert rg.num_groups == 8 // group_size and isinstance(rg.num_groups, int)
    assert rg.is_const and rg.const_rg is rg
    assert rg.to_device_map is None and rg.to_host_map is None


@pytest.mark.parametrize("n", [1, 2, 4, 6, 8, 12, 16])
def test_every_valid_pair_matches_the_definition(n):
    for stride, gs in itertools.product(range(1, n + 1), repeat=2):
        ir = _ir(n)
        if n % (stride * gs) == 0:
            rg = ir.replica_grouping(stride, gs)
            assert rg.assignment == _groups_by_definition(n, stride, gs)
            # the same partition given as an assignment is recognised as constant
            back = ir.replica_grouping_from_assignments(rg.assignment)
            assert back.is_const and back == rg
            assert back.group_size == gs and (gs == 1 or back.stride == stride)
        elif gs > 1:
            with pytest.raises(ValueError):
                ir.replica_grouping(stride, gs)


def test_defaults_and_invalid_arguments():
    ir = _ir(8)
    rg = ir.replica_grouping()
    assert (rg.stride, rg.group_size, rg.num_groups) == (1, 8, 1)
    assert ir.replica_grouping(stride=2).group_size == 4
    for kwargs in ({"stride": 0}, {"stride": 9}, {"stride": 3}, {"group_size": 0},
                   {"group_size": 9}, {"stride": 2, "group_size": 3}):
        with pytest.raises(ValueError):
            ir.replica_grouping(**kwargs)
    with pytest.raises(RuntimeError):
        popxl.ReplicaGrouping()


def test_repr_and_eq():
    ir = _ir(8)
    assert repr(ir.replica_grouping(stride=2, group_size=4)) == \
        "ReplicaGrouping(num_replicas=8, stride=2, group_size=4, num_groups=2)"
    assert ir.replica_grouping(2, 4) == ir.replica_grouping(2, 4)
    assert ir.replica_grouping(2, 2) != ir.replica_grouping(2, 4)
    with pytest.raises(TypeError):
        _ = ir.replica_grouping() == 1
    nc = ir.replica_grouping_from_assignments([0, 0, 1, 1, 0, 0, 1, 1])
    assert repr(nc) == "ReplicaGrouping(assignment=[0, 0, 1, 1, 0, 0, 1, 1])"


@pytest.mark.parametrize("before,after", [
    ([0, 0, 0, 0], [0, 1, 2, 3]),
    ([0, 1, 0, 1], [0, 0, 1, 1]),
    ([0, 0, 1, 1], [0, 1, 0, 1]),
    ([0, 1, 2, 3], [0, 0, 0, 0]),
    ([0, 1, 0, 1, 2, 3, 2, 3], [0, 0, 1, 1, 0, 0, 1, 1]),
])
def test_transpose_documented(before, after):
    ir = _ir(len(before))
    rg = ir.replica_grouping_from_assignments(before)
    assert rg.transpose().assignment == after


def test_transpose_of_stride2_group2_on_8_replicas():
    rg = _ir(8).replica_grouping(stride=2, group_size=2)
    t = rg.transpose()
    # group matrix [[0,2],[1,3],[4,6],[5,7]] transposed: {0,1,4,5}, {2,3,6,7}
    assert t.assignment == [0, 0, 1, 1, 0, 0, 1, 1]
    assert not t.is_const
    with pytest.raises(NotImplementedError):
        _ = t.stride
    assert t.group_size == 4 and t.num_groups == 2


def test_non_constant_grouping_maps():
    # PopXL's example: [0,0,1,1,0,0,1,1] -> const_rg [0,0,1,1,2,2,3,3],
    # to_device_map [0,1,0,1], to_host_map [0,1]
    rg = _ir(8).replica_grouping_from_assignments([0, 0, 1, 1, 0, 0, 1, 1])
    assert not rg.is_const
    assert rg.const_rg.assignment == [0, 0, 1, 1, 2, 2, 3, 3]
    assert rg.to_device_map == [0, 1, 0, 1]
    assert rg.to_host_map == [0, 1]
    # every const group lies in one group of rg
    for c in range(rg.const_rg.num_groups):
        owners = {a for a, cc in zip(rg.assignment, rg.const_rg.assignment) if cc == c}
        assert owners == {rg.to_device_map[c]}


@pytest.mark.parametrize("assignment", [
    [0, 0, 1],              # wrong length (4 replicas)
    [0, 0, 0, 1],           # unequal sizes
    [1, 1, 0, 0],           # not in order of first appearance
    [0, 0, 2, 2],           # not consecutive
])
def test_from_assignments_errors(assignment):
    with pytest.raises(ValueError):
        _ir(4).replica_grouping_from_assignments(assignment)
