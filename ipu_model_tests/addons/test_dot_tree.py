"""DotTree / NamedTensors / NamedVariableFactories: structure, the three
orderings, and errors."""
import numpy as np
import pytest

import ipuxl as popxl
from ipuxl.addons import DotTree, NamedTensors, NamedVariableFactories, VariableFactory
from ipuxl.addons.dot_tree import sanitise, to_mapping


def test_insert_get_nested_and_numeric():
    t = DotTree()
    t.insert("a", 1)
    t.insert("b.c", 2)
    t.insert(0, "zero")
    # popxl_addons: an existing head is a clash unless overwrite=True (which extends it)
    with pytest.raises(ValueError):
        t.insert("b.d.e", 3)
    assert "b.d" not in t
    t.insert("b.d.e", 3, overwrite=True)
    assert t.a == 1 and t.b.c == 2 and t["b.d.e"] == 3 and t.b.d.e == 3
    assert t[0] == "zero" and t["0"] == "zero"
    assert isinstance(t.b, DotTree)
    assert "b.c" in t and "b.x" not in t and "zz" not in t
    assert t.keys() == ["a", "b", "0"]
    assert t.keys_flat() == ["a", "b.c", "b.d.e", "0"]
    assert t.len() == 3 and t.len_flat() == 4


def test_negative_numeric_keys_count_from_largest():
    t = DotTree()
    for k in (0, 1, 3):
        t.insert(k, k * 10)
    assert t[-1] == 30 and t[-3] == 10
    with pytest.raises(KeyError):
        t[-2]  # would be key 2, which does not exist
    with pytest.raises(KeyError):
        t[-5]


def test_insert_errors_and_rollback():
    t = DotTree(a=1)
    with pytest.raises(ValueError, match="already exists"):
        t.insert("a", 2)
    with pytest.raises(ValueError, match="negative"):
        t.insert(-1, 2)
    with pytest.raises(ValueError, match="not a valid key"):
        t.insert("bad-key", 2)
    t.insert("n.x", 1)
    with pytest.raises(ValueError):
        t.insert("n.x", 2)  # nested clash
    assert t.n.x == 1  # untouched
    with pytest.raises(ValueError):
        t.insert("n.ok.bad-key", 1)
    assert t.n.keys() == ["x"]  # rolled back
    t.insert("a", 5, overwrite=True)
    assert t.a == 5
    with pytest.raises(KeyError, match="Available keys"):
        t.get("nope")
    with pytest.raises(AttributeError, match="Available keys"):
        t.nope


def test_overwrite_merges_nested():
    t = DotTree.from_dict({"fwd.linear": 1})
    t.insert("fwd.offset", 2, overwrite=True)
    assert t.to_dict() == {"fwd.linear": 1, "fwd.offset": 2}
    t.insert("fwd", DotTree(extra=3), overwrite=True)
    assert t.fwd.keys() == ["linear", "offset", "extra"]


def test_orderings_to_dict_unpack():
    t = DotTree.from_dict({"z": 1, "a.b": 2, "m": 3})
    assert list(t.to_dict()) == ["z", "a.b", "m"]  # insertion
    keys, values = t.unpack()
    assert keys == ("a.b", "m", "z") and values == (2, 3, 1)  # sorted by key
    assert DotTree().unpack() == ([], [])
    p = DotTree.pack(keys, values)
    assert p.to_dict() == {"a.b": 2, "m": 3, "z": 1}


def test_copy_update_pop_map_filter_clear():
    inner = DotTree(x=1)
    t = DotTree(inner=inner, y=2)
    c = t.copy()
    assert c.inner is not inner and c.inner.x == 1
    u = DotTree(y=3)
    with pytest.raises(ValueError):
        t.update(u)
    t.update(u, overwrite=True)
    assert t.y == 3
    assert t.pop("inner.x") == 1 and "inner.x" not in t
    m = DotTree.from_dict({"a": 1, "b.c": 2}).map(lambda v: v * 10)
    assert m.to_dict() == {"a": 10, "b.c": 20}
    f = DotTree.from_dict({"a": 1, "b.c": 2, "d": 3}).filter_keys(["b.c", "d"])
    assert f.to_dict() == {"b.c": 2, "d": 3}
    with pytest.raises(ValueError, match="duplicate"):
        DotTree(a=1).filter_keys(["a", "a"])
    shared = DotTree(w=1)
    parent = DotTree(sub=shared, v=2)
    parent._clear()
    assert parent.keys() == ["sub"] and parent.sub is shared and shared.keys() == []


def test_to_mapping_intersection_and_repr():
    a = DotTree.from_dict({"x": 1, "y": 2})
    b = DotTree.from_dict({"y": "Y", "z": "Z"})
    assert to_mapping(a, b) == {2: "Y"} and a.to_mapping(b) == {2: "Y"}
    assert repr(DotTree(w=1)) == "DotTree({\nw: 1,\n})"
    assert sanitise("fc1/weight:0") == "fc1_weight_0" and sanitise("1a") == "_1a"


def test_methods_win_over_keys():
    t = DotTree()
    t.insert("keys", 1)
    assert callable(t.keys) and t["keys"] == 1


def test_named_tensors_orderings():
    ir = popxl.Ir()
    with ir.main_graph:
        b = popxl.variable(np.zeros(2, np.float32), name="fc1.bias")
        w = popxl.variable(np.zeros(2, np.float32), name="fc1.weight")
        c = popxl.variable(np.zeros(2, np.float32), name="mean_accum_counter")
        a = popxl.variable(np.zeros(2, np.float32), name="accum.w")
        nt = NamedTensors.from_dict({"z": c, "fc1.weight": w, "fc1.bias": b, "acc": a})
    assert list(nt.named_tensors) == ["z", "fc1.weight", "fc1.bias", "acc"]
    assert nt.tensors == (a, b, w, c)  # by tensor name: counter sorts last
    assert nt.tensors[:-1] == (a, b, w)
    assert nt.unpack()[0] == ("acc", "fc1.bias", "fc1.weight", "z")
    assert set(nt.variables) == {a, b, w, c}
    r = nt.remap({a: 1, b: 2, w: 3, c: 4})
    assert r.to_dict() == {"z": 4, "fc1.weight": 3, "fc1.bias": 2, "acc": 1}
    with pytest.raises(KeyError):
        nt.remap({a: 1})


def test_variable_factory_rng_pattern_and_init():
    """The callable is called once to test it, then peeked: the first init
    returns the second draw (popxl_addons' RNG consumption)."""
    ir = popxl.Ir()
    with ir.main_graph:
        np.random.seed(42)
        f = VariableFactory(lambda: np.random.normal(0, 1, (2, 3)), popxl.float32, "w")
        np.random.seed(42)
        np.random.normal(0, 1, (2, 3))
        second = np.random.normal(0, 1, (2, 3))
        assert f.shape == (2, 3) and f.dtype == popxl.float32 and f.meta_shape == ()
        facts = NamedVariableFactories(w=f, b=VariableFactory(lambda: np.zeros(3, np.float32)))
        assert facts.b.dtype == popxl.float32  # inferred
        vs = facts.init(prefix="layer")
        assert vs.w.name == "layer.w" and vs.b.name == "layer.b"
        zs = facts.init_zero()
    assert zs.w.shape == (2, 3)
    with popxl.Session(ir, "ipu_model") as s:
        np.testing.assert_allclose(s.get_tensor_data(vs.w), second.astype(np.float32))


def test_variable_factory_errors_and_groups():
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        with pytest.raises(ValueError, match="iterable or a callable"):
            VariableFactory(3)
        with pytest.raises(ValueError, match="raised"):
            VariableFactory(lambda: 1 / 0)
        with pytest.raises(ValueError, match="numpy arrays"):
            VariableFactory(lambda: "x")
        with pytest.raises(ValueError, match="shard_over"):
            VariableFactory(lambda: np.zeros(8), shard_over=8)
        rg = ir.replica_grouping(stride=1, group_size=2)
        it = iter([np.full(3, 1.0, np.float32), np.full(3, 2.0, np.float32)])
        f = VariableFactory(it, replica_grouping=rg, name="g")
        assert f.next_data().shape == (2, 3)  # one sample per group
        s = VariableFactory(lambda: np.zeros((4, 2), np.float32), shard_over=4, name="s")
        assert s.shape == (2,) and s.meta_shape == (4, 2) and s.replica_sharded
        facts = NamedVariableFactories(g=VariableFactory(lambda: np.zeros(1), replica_grouping=rg))
        assert facts.replica_groupings.g == rg


def test_nested_insert_clash_and_overwrite_merge():
    """popxl_addons' DotTree.insert: any existing part of a dotted key is a
    clash without overwrite; overwrite=True merges nested trees and replaces
    leaves; a failed insert changes nothing; from_dict shares prefixes."""
    t = DotTree()
    t.insert("x.y.z", 1)
    t.insert("n.0.m", 2)
    assert t.x.y.z == 1 and t.n[0].m == 2
    before = t.to_dict()
    with pytest.raises(ValueError):
        t.insert("x.y.w", 3)
    with pytest.raises(ValueError):
        t.insert("x", 4)
    assert t.to_dict() == before
    t.insert("x.y.w", 3, overwrite=True)
    assert t.to_dict() == {"x.y.z": 1, "x.y.w": 3, "n.0.m": 2}
    t.insert("x.y.z", 5, overwrite=True)
    assert t.x.y.z == 5
    f = DotTree.from_dict({"p.q": 1, "p.r": 2, "p.s.t": 3, "u": 4})
    assert f.to_dict() == {"p.q": 1, "p.r": 2, "p.s.t": 3, "u": 4}
    with pytest.raises(ValueError):
        DotTree.from_dict({"p": 1, "p.q": 2})
