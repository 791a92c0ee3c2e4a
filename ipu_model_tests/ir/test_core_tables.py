"""The tables that cross the Python/C++ border come from one side: the
core exports its enums (``ipuxl._core``), the frontend reads them. What
is still written down on the Python side is compared here."""
import numpy as np

import ipuxl as popxl
from ipuxl import dtypes
from ipuxl._core_loader import core
from ipuxl.opdef import COST_CLASSES, KINDS, Cost
from ipuxl.ops import collectives


def _members(enum):
    return {name: int(v) for name, v in enum.__members__.items()}


def test_every_enum_is_exported_with_dense_codes():
    for enum in (core.DType, core.TensorKind, core.OpKind, core.CollectiveKind, core.ReduceOp,
                 core.TileSet, core.ExecContext, core.CostClass):
        codes = sorted(_members(enum).values())
        assert codes == list(range(len(codes))), enum


def test_op_kinds_are_the_cores():
    assert KINDS[:-1] == tuple(core.OpKind.__members__)
    assert KINDS[-1] == "multi_exchange" and "multi_exchange" not in core.OpKind.__members__
    assert set(COST_CLASSES) == set(core.CostClass.__members__) - {"none"}


def test_dtypes_carry_the_cores_codes_and_sizes():
    held = {d.name: d for d in dtypes.dtype._by_name.values() if d._code is not None}
    assert set(held) == set(core.DType.__members__)
    for name, d in held.items():
        assert d._core_code == int(core.DType.__members__[name])
        assert d.itemsize == core.dtype_size(core.DType.__members__[name]), name
    for d in (popxl.complex64, popxl.complex128):
        assert d._code is None


def test_reductions_are_the_cores():
    assert collectives.OP_MAP == {n: v for n, v in _members(core.ReduceOp).items() if n != "local"}
    assert collectives._LOCAL == int(core.ReduceOp.local)
    assert (collectives._ALL_REDUCE, collectives._ALL_GATHER, collectives._REDUCE_SCATTER) == (
        _members(core.CollectiveKind)["all_reduce"], _members(core.CollectiveKind)["all_gather"],
        _members(core.CollectiveKind)["reduce_scatter"])


def test_the_bindings_refuse_codes_outside_the_enums():
    import pytest

    d = core.ProgramDesc()
    g = d.add_graph("main")
    x = d.add_tensor(g, "x", int(core.DType.float32), [2], int(core.TensorKind.input))
    with pytest.raises(ValueError, match="invalid tensor kind"):
        d.add_tensor(g, "y", int(core.DType.float32), [2], len(core.TensorKind.__members__))
    n = {"reduction": ("reduce_op", core.ReduceOp), "context": ("context", core.ExecContext),
         "op kind": ("kind", core.OpKind), "cost class": ("cost_class", core.CostClass),
         "collective kind": ("collective_kind", core.CollectiveKind)}
    for what, (arg, enum) in n.items():
        with pytest.raises(ValueError, match=f"invalid {what}"):
            d.add_op(g, "Relu", "r", [x], [], {}, [], [], **{arg: len(enum.__members__)})
    with pytest.raises(ValueError, match="invalid dtype"):
        d.add_tensor(g, "z", len(core.DType.__members__), [2], 0)


def test_a_cost_names_a_class_of_the_core():
    import pytest

    assert Cost("conv").code == core.CostClass.conv
    with pytest.raises(ValueError, match="must be one of"):
        Cost("convolution")
    with pytest.raises(ValueError, match="two ints"):
        Cost("elementwise", header=(1,))
    assert np.all([isinstance(c, str) for c in COST_CLASSES])


def test_the_batch_records_are_checked_as_single_ones():
    """add_tensors / add_ops (what to_desc uses) take tuples of add_tensor's
    and add_op's positional arguments and refuse what those refuse."""
    import pytest

    f32, inp = int(core.DType.float32), int(core.TensorKind.input)
    d = core.ProgramDesc()
    g = d.add_graph("main")
    first = d.add_tensors([(g, "x", f32, (2,), inp, 0, 0), (g, "y", f32, [2], inp, 0, 0)])
    assert (first, d.num_tensors) == (0, 2)
    assert d.add_tensors([]) == 2
    with pytest.raises(ValueError, match="invalid tensor kind"):
        d.add_tensors([(g, "z", f32, [2], len(core.TensorKind.__members__), 0, 0)])
    with pytest.raises(ValueError, match="negative dimension"):
        d.add_tensors([(g, "z", f32, [-1], inp, 0, 0)])
    with pytest.raises(ValueError, match="record 0 is not a tuple of 7 items"):
        d.add_tensors([(g, "z", f32, [2], inp)])
    with pytest.raises(ValueError, match="record 0, field 1: expected a str"):
        d.add_tensors([(g, 3, f32, [2], inp, 0, 0)])

    def op(name, ins, outs, aliases=(), modified=(), kind=0):
        return (g, "Relu", name, ins, outs, {"alpha": 1}, [], list(aliases), "", kind,
                list(modified), False, 0, 0, 0, -1, 0, [], False, 0, -1, 0, 0, [], -1, "",
                [], [], [], False, False, -1)

    d.add_ops([op("r", [0], [1])])
    assert d.num_ops == 1
    with pytest.raises(ValueError, match="invalid alias pair"):
        d.add_ops([op("a", [0], [1], aliases=[(1, 0)])])
    with pytest.raises(ValueError, match="modified input index 3"):
        d.add_ops([op("m", [0], [1], modified=[3])])
    with pytest.raises(ValueError, match="invalid op kind"):
        d.add_ops([op("k", [0], [1], kind=len(core.OpKind.__members__))])
    with pytest.raises(ValueError, match="no tensor with index 9"):
        d.add_ops([op("t", [9], [1])])
    with pytest.raises(ValueError, match="record 1, field 3: expected a sequence of ints"):
        d.add_ops([op("ok", [0], [1]), op("bad", 5, [1])])
    with pytest.raises(ValueError, match="record 0 is not a tuple of 32 items"):
        d.add_ops([op("short", [0], [1])[:31]])
    # A refused record adds nothing; the ones before it are kept, as with add_op.
    assert d.num_ops == 2
