"""Conformance of tensors (popxl.Tensor, Variable, Constant, TensorSpec):
properties, naming, dunders (checked numerically against NumPy), host-value
coercion, repr, and the creation functions' rules."""
import operator

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.errors import UndefinedValue
from harness import run_fn


class TestProperties:
    def test_main_graph_tensor(self):
        with popxl.Ir().main_graph:
            w = popxl.variable(np.zeros((2, 3, 4), np.float32), name="w")
        assert w.id == "w" and w.name == "w" and w.scope == ""
        assert w.shape == (2, 3, 4) and w.rank == 3 and w.nelms == 24
        assert w.dtype == popxl.float32
        assert w.spec == popxl.TensorSpec((2, 3, 4), popxl.float32)
        assert w.meta_shape == ()
        assert len(w) == 2

    def test_subgraph_tensor(self):
        ir = popxl.Ir()

        def fn(x):
            return x + 1

        with ir.main_graph:
            g = ir.create_graph(fn, popxl.variable(1.0))
        x = g.inputs[0]
        assert x.id == f"{g.name}/x" and x.name == "x" and x.scope == g.name
        assert x.ir is ir
        assert x.shape == () and x.rank == 0 and x.nelms == 1

    def test_default_name_and_dedup(self):
        with popxl.Ir().main_graph:
            a = popxl.variable(1)
            b = popxl.variable(1, name="w")
            c = popxl.variable(1, name="w")
        assert a.name == "t"
        assert b.id == "w"
        assert c.id != "w" and c.id.startswith("w__t")

    def test_name_scope_ids(self):
        with popxl.Ir().main_graph:
            with popxl.name_scope("outer"), popxl.name_scope("inner"):
                v = popxl.variable(1, name="v")
        assert v.id == "outer/inner/v"

    def test_scalar_len_raises(self):
        with popxl.Ir().main_graph:
            x = popxl.variable(1)
            with pytest.raises(ValueError):
                len(x)

    def test_nelms_of_empty(self):
        with popxl.Ir().main_graph:
            x = popxl.variable(np.zeros((3, 0), np.float32))
        assert x.nelms == 0 and x.shape == (3, 0)


class TestConstruction:
    def test_tensor_cannot_be_constructed(self):
        # PopXL: Tensor.__init__ raises RuntimeError("popxl.Tensor cannot be constructed directly.")
        with pytest.raises(RuntimeError):
            popxl.Tensor()

    def test_variable_outside_main_graph(self):
        ir = popxl.Ir()
        g = ir.create_empty_graph()
        with ir.main_graph, g:
            with pytest.raises(ValueError):
                popxl.variable(1)
            popxl.constant(1)  # constants are allowed in any graph

    @pytest.mark.parametrize("ctor", [popxl.variable, popxl.constant])
    @pytest.mark.parametrize("data,expected", [
        (np.zeros(3, np.float64), popxl.float32),
        (np.zeros(3, np.int64), popxl.int32),
        (np.zeros(3, np.uint64), popxl.uint32),
        (1, popxl.int32),
        (1.5, popxl.float32),
        (True, popxl.bool),
        ([[1, 2], [3, 4]], popxl.int32),
        (np.zeros(3, np.float16), popxl.float16),
        (np.zeros(3, np.int8), popxl.int8),
    ])
    def test_downcast(self, ctor, data, expected):
        with popxl.Ir().main_graph:
            t = ctor(data)
        assert t.dtype == expected
        assert t.shape == np.shape(data)

    @pytest.mark.parametrize("ctor", [popxl.variable, popxl.constant])
    def test_no_downcast(self, ctor):
        with popxl.Ir().main_graph:
            t = ctor(np.zeros(2, np.float64), downcast=False)
            u = ctor(np.zeros(2, np.float64), dtype=popxl.float16)
        assert t.dtype == popxl.float64
        assert u.dtype == popxl.float16

    def test_types(self):
        with popxl.Ir().main_graph:
            v = popxl.variable(1)
            c = popxl.constant(1)
            y = v + c
        assert isinstance(v, popxl.Variable) and isinstance(v, popxl.Tensor)
        assert isinstance(c, popxl.Constant) and isinstance(c, popxl.Tensor)
        assert type(y) is popxl.Tensor

    def test_tensor_spec(self):
        spec = popxl.TensorSpec((1, 2), popxl.int32)
        assert spec.shape == (1, 2) and spec.dtype == popxl.int32 and spec.meta_shape == ()
        assert dict(spec) == {"shape": (1, 2), "dtype": popxl.int32, "meta_shape": ()}
        assert spec.to_tuple() == ((1, 2), popxl.int32, ())
        assert hash(spec) == hash(popxl.TensorSpec((1, 2), popxl.int32))
        ir = popxl.Ir()
        g = ir.create_empty_graph()
        with g:
            t = popxl.graph_input(**spec, name="w")
        assert t.shape == (1, 2) and t.dtype == popxl.int32 and t.name == "w"


class TestRepr:
    def test_repr(self):
        # PopXL's Tensor.__repr__ is f"Tensor[{id} {dtype} {shape}]" for every kind of tensor.
        ir = popxl.Ir()

        def subgraph1(a):
            return a + a

        with ir.main_graph:
            a = popxl.variable([1], name="bob")
            g = ir.create_graph(subgraph1, a)
        assert repr(a) == "Tensor[bob popxl.dtypes.int32 (1,)]"
        assert repr(g.inputs[0]) == (
            "Tensor[TestRepr.test_repr.subgraph1_subgraph(0)/a popxl.dtypes.int32 (1,)]")


class TestEqualityAndContainers:
    def test_eq_hash(self):
        with popxl.Ir().main_graph:
            a = popxl.variable(1)
            b = popxl.variable(1)
            eq = a == b
        assert eq is False and a == a and a != b
        assert len({a, b, a}) == 2

    def test_iter_and_contains_raise(self):
        with popxl.Ir().main_graph:
            x = popxl.variable([1, 2])
            with pytest.raises(TypeError):
                iter(x)
            with pytest.raises(TypeError):
                _ = 1 in x
            lst = []
            with pytest.raises(ValueError):
                lst += x  # falls back to x.__radd__([]): an empty constant

    def test_ensure_tensor(self):
        with popxl.Ir().main_graph:
            a = popxl.variable(1.0)
            b = popxl.variable(2.0)
            assert a._ensure_tensor(b) is b
            c = a._ensure_tensor(3)
            assert isinstance(c, popxl.Constant) and c.dtype == popxl.float32
            with pytest.raises(ValueError):
                a._ensure_tensor([])


class TestIpuAndTileSet:
    def test_variable_ipu_undefined(self):
        with popxl.Ir().main_graph:
            a = popxl.variable(1)
            with pytest.raises(UndefinedValue):
                _ = a.ipu
            with pytest.raises(UndefinedValue):
                _ = a.tile_set

    def test_op_output(self):
        with popxl.Ir().main_graph:
            a = popxl.variable(1) + 0
            with popxl.ipu(1):
                b = popxl.variable(1) + 0
            with popxl.io_tiles():
                c = popxl.variable(1) + 0
        assert a.ipu == 0 and a.tile_set == "compute"
        assert b.ipu == 1
        assert c.tile_set == "io"


X = np.array([[1.5, -2.0, 3.0], [0.5, 4.0, -1.0]], np.float32)
Y = np.array([[2.0, 0.5, -3.0], [1.0, -4.0, 2.0]], np.float32)


class TestDunders:
    @pytest.mark.parametrize("fn,ref", [
        (lambda x, y: x + y, lambda x, y: x + y),
        (lambda x, y: x - y, lambda x, y: x - y),
        (lambda x, y: x * y, lambda x, y: x * y),
        (lambda x, y: x / y, lambda x, y: x / y),
        (lambda x, y: x @ y.T, lambda x, y: x @ y.T),
        (lambda x, y: -x, lambda x, y: -x),
        (lambda x, y: x % y, lambda x, y: np.fmod(x, y)),
        (lambda x, y: x ** 2, lambda x, y: x ** 2),
    ], ids=["add", "sub", "mul", "div", "matmul", "neg", "mod", "pow"])
    def test_binary(self, fn, ref):
        got = run_fn(fn, X, Y)
        np.testing.assert_allclose(got, ref(X, Y), rtol=1e-6)

    @pytest.mark.parametrize("fn,ref", [
        (lambda x: 2 + x, lambda x: 2 + x),
        (lambda x: 2 - x, lambda x: 2 - x),
        (lambda x: 3 * x, lambda x: 3 * x),
        (lambda x: 1 / x, lambda x: 1 / x),
        (lambda x: x + 1, lambda x: x + 1),
        (lambda x: x - np.ones(3), lambda x: x - 1),  # float64 host array becomes float32
        (lambda x: np.full((3,), 2.0) * x, lambda x: 2 * x),
        (lambda x: np.ones((4, 2), np.float32) @ x, lambda x: np.ones((4, 2), np.float32) @ x),
        (lambda x: [10.0, 20.0, 30.0] - x, lambda x: np.array([10, 20, 30], np.float32) - x),
    ], ids=["radd", "rsub", "rmul", "rdiv", "add_int", "sub_array", "rmul_array",
            "rmatmul_array", "rsub_list"])
    def test_reflected_and_host_values(self, fn, ref):
        got = run_fn(fn, X)
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, ref(X), rtol=1e-6)

    def test_host_value_takes_tensor_dtype(self):
        with popxl.Ir().main_graph:
            x = popxl.variable(np.zeros(3, np.float16))
            y = x + 1.5
            i = popxl.variable(np.zeros(3, np.int32))
            j = 2 * i
        assert y.dtype == popxl.float16
        assert j.dtype == popxl.int32

    def test_logical(self):
        a = np.array([True, False, True, False])
        b = np.array([True, True, False, False])
        got_and, got_or, got_not = run_fn(lambda x, y: (x & y, x | y, ~x), a, b)
        np.testing.assert_array_equal(got_and, a & b)
        np.testing.assert_array_equal(got_or, a | b)
        np.testing.assert_array_equal(got_not, ~a)

    def test_iadd_returns_same_tensor(self):
        with popxl.Ir().main_graph:
            x = popxl.variable(np.zeros(3, np.float32)) + 1
            before = x
            x += 2
        assert x is before

    def test_iadd_updates_value(self):
        def fn(x):
            y = x * 1  # a fresh tensor to modify in place
            z = y
            z += 3
            return y

        np.testing.assert_allclose(run_fn(fn, X), X + 3)

    @pytest.mark.parametrize("op,ref", [(operator.isub, 4), (operator.imul, 12),
                                        (operator.itruediv, 3)], ids=["-=", "*=", "/="])
    def test_other_augmented_assignments_are_out_of_place(self, op, ref):
        # PopXL defines only __iadd__; x -= y etc. fall back to __sub__ and friends,
        # which rebind the name to a new tensor and leave the original unchanged.
        ir = popxl.Ir()
        with ir.main_graph:
            v = popxl.variable(np.full(3, 6, np.float32), name="v")
            w = op(v, 2)  # the same call as `w = v; w -= 2`
            s_v = popxl.d2h_stream(v.shape, v.dtype, "s_v")
            ops.host_store(s_v, v)
            s_w = popxl.d2h_stream(w.shape, w.dtype, "s_w")
            ops.host_store(s_w, w)
        assert w is not v and not isinstance(w, popxl.Variable)
        with popxl.Session(ir, "ipu_model") as sess:
            out = sess.run()
            v_data = sess.get_tensor_data(v)
        np.testing.assert_allclose(out[s_w], np.full(3, ref))
        np.testing.assert_allclose(out[s_v], np.full(3, 6))
        np.testing.assert_allclose(v_data, np.full(3, 6))

    def test_iadd_on_variable(self):
        ir = popxl.Ir()
        with ir.main_graph:
            v = popxl.variable(np.arange(3, dtype=np.float32), name="v")
            w = v
            w += 1
            s = popxl.d2h_stream(v.shape, v.dtype, "s")
            ops.host_store(s, v)
        assert w is v
        with popxl.Session(ir, "ipu_model") as sess:
            out = sess.run()[s]
            v_data = sess.get_tensor_data(v)
        np.testing.assert_allclose(out, [1, 2, 3])
        np.testing.assert_allclose(v_data, [1, 2, 3])


@pytest.mark.parametrize("shape,np_dtype", [((2, 4, 1, 3), np.float32), ((), np.int32),
                                            ((5,), np.float16), ((3, 2), np.uint8)])
def test_strides_match_numpy(shape, np_dtype):
    """Tensor.strides() is numpy's ndarray.strides for a C-ordered array: a tuple."""
    arr = np.zeros(shape, np_dtype)
    ir = popxl.Ir()
    with ir.main_graph:
        c = popxl.constant(arr)
    assert c.strides() == arr.strides
    assert isinstance(c.strides(), tuple)
    assert c.strides((4, 5)) == np.zeros((4, 5), np_dtype).strides
