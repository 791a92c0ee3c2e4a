"""``popxl_addons.named_replica_grouping.get_ild_replica_grouping``: a
grouping restricted to one IPU Link Domain (popxl-addons' contract: same
stride, ``group_size = ild_size // stride`` when the groups span more than
one ILD), checked on the replica assignment it gives against NumPy."""
import numpy as np
import pytest

import ipuxl as popxl
from ipuxl.addons.named_replica_grouping import (get_ild_replica_grouping,
                                                  get_ild_size_from_popdist, is_cross_ild)


def _expected_assignment(replicas, stride, group_size):
    """Group index of each replica for groups of ``group_size`` replicas
    ``stride`` apart (Poplar's CommGroup orthogonal pattern), by NumPy."""
    r = np.arange(replicas)
    return list((r // (stride * group_size)) * stride + r % stride)


@pytest.mark.parametrize("stride,group_size,ild,expect", [
    (1, 8, 4, (1, 4)),     # all replicas -> one ILD each
    (2, 4, 4, (2, 2)),     # strided across two ILDs
    (1, 2, 4, (1, 2)),     # already inside one ILD: unchanged
    (4, 2, 8, (4, 2)),
])
def test_restricted_to_one_ild(monkeypatch, stride, group_size, ild, expect):
    monkeypatch.setenv("POPLAR_TARGET_OPTIONS", f'{{"ipuLinkDomainSize": {ild}}}')
    ir = popxl.Ir(8)
    with ir.main_graph:
        rg = ir.replica_grouping(stride=stride, group_size=group_size)
        assert get_ild_size_from_popdist() == ild
        assert is_cross_ild(rg) == (stride * group_size > ild)
        out = get_ild_replica_grouping(rg)
    assert (out.stride, out.group_size) == expect
    assert out.assignment == _expected_assignment(8, *expect)
    # each ILD-restricted group lies inside one ILD
    members = {}
    for replica, g in enumerate(out.assignment):
        members.setdefault(g, []).append(replica)
    for m in members.values():
        assert len({r // ild for r in m}) == 1


def test_default_is_all_replicas_and_ild_size_defaults_to_replicas(monkeypatch):
    monkeypatch.delenv("POPLAR_TARGET_OPTIONS", raising=False)
    ir = popxl.Ir(4)
    with ir.main_graph:
        assert get_ild_size_from_popdist() == 4          # min(replicas, 64)
        out = get_ild_replica_grouping()
    assert (out.stride, out.group_size) == (1, 4)


def test_stride_beyond_the_ild_is_refused(monkeypatch):
    monkeypatch.setenv("POPLAR_TARGET_OPTIONS", '{"ipuLinkDomainSize": 2}')
    ir = popxl.Ir(8)
    with ir.main_graph:
        with pytest.raises(ValueError, match="stride must be < IPU Link Domain size"):
            get_ild_replica_grouping(ir.replica_grouping(stride=4, group_size=2))


@pytest.mark.parametrize("text,match", [("{", "not valid JSON"), ("[1]", "JSON object"),
                                        ('{"ipuLinkDomainSize": "x"}', "must be an integer")])
def test_bad_target_options_say_so(monkeypatch, text, match):
    monkeypatch.setenv("POPLAR_TARGET_OPTIONS", text)
    ir = popxl.Ir(2)
    with ir.main_graph:
        with pytest.raises(ValueError, match=match):
            get_ild_size_from_popdist()
