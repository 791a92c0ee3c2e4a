"""print_tensor: identity result, and the text written to stderr (checked
with capfd) in PopART's PrintTensor format."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops

X22 = np.array([[1.4962566, 1.7682219], [1.0884774, 1.1320305]], np.float32)


def run_print(x, capfd, name="x", **kwargs):
    """Print variable `x` (named `name`), store the op's result; returns
    (stderr text, stored result)."""
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(x, popxl.dtypes.dtype.as_dtype(np.asarray(x).dtype), name=name,
                           downcast=False)
        y = ops.print_tensor(v, **kwargs)
        s = popxl.d2h_stream(y.shape, y.dtype, name="out")
        ops.host_store(s, y)
    capfd.readouterr()
    with popxl.Session(ir, "ipu_model") as session:
        out = session.run()[s]
    return capfd.readouterr().err, out


# The three formats of PopTorch's ipu_print_tensor test, which uses the same
# poplar PrintTensorFmt options.
POPTORCH_CASES = [
    (dict(summarise_threshold=1000, edge_items=3, max_line_width=75, digits=8,
          float_format="auto", separator=" ", open_bracket="{", close_bracket="}"),
     "title: {\n {1.4962566 1.7682219}\n {1.0884774 1.1320305}\n}"),
    (dict(summarise_threshold=500, edge_items=2, max_line_width=15, digits=8,
          float_format="scientific", separator=",", open_bracket="[", close_bracket="]"),
     "title: [\n [1.4962566e+00,\n   1.7682219e+00]\n [1.0884774e+00,\n   1.1320305e+00]\n]"),
    (dict(summarise_threshold=1500, edge_items=1, max_line_width=125, digits=8,
          float_format="fixed", separator=";", open_bracket="(", close_bracket=")"),
     "title: (\n (1.4962566;1.7682219)\n (1.0884774;1.1320305)\n)"),
]


@pytest.mark.parametrize("kwargs,expected", POPTORCH_CASES)
def test_poptorch_formats(capfd, kwargs, expected):
    err, out = run_print(X22, capfd, title="title", **kwargs)
    assert expected in err
    np.testing.assert_array_equal(out, X22)


def test_default_title_and_identity(capfd):
    x = np.array([0.0, 1.0], np.float32)
    err, out = run_print(x, capfd, name="x")
    assert err == "print_x: [0.0000000 1.0000000]\n"
    np.testing.assert_array_equal(out, x)


def test_custom_open_bracket_as_popxl_test(capfd):
    err, _ = run_print(np.array([0.0, 1.0], np.float32), capfd, title="x", print_gradient=True,
                       open_bracket="|")
    assert "|" in err and err.startswith("x: |")


def test_print_self_false_prints_nothing(capfd):
    err, out = run_print(X22, capfd, print_self=False)
    assert err == ""
    np.testing.assert_array_equal(out, X22)


def test_scalar_empty_and_integers(capfd):
    err, out = run_print(np.float32(3.5), capfd, name="s")
    assert err == "print_s: 3.5000000\n" and out == 3.5
    err, _ = run_print(np.zeros((2, 0), np.float32), capfd, name="e")
    assert err == "print_e: []\n"
    err, out = run_print(np.array([-12, 3, 456], np.int32), capfd, name="i")
    assert err == "print_i: [-12   3 456]\n"
    np.testing.assert_array_equal(out, [-12, 3, 456])
    err, _ = run_print(np.array([True, False]), capfd, name="b")
    assert err == "print_b: [1 0]\n"


def test_summarise(capfd):
    x = np.arange(2000, dtype=np.int32).reshape(20, 100)
    err, out = run_print(x, capfd, name="big")
    lines = err.splitlines()
    assert lines[0] == "print_big: ["
    assert lines[1] == " [   0    1    2 ...   97   98   99]"
    assert lines[4] == " ..."
    assert lines[-2] == " [1900 1901 1902 ... 1997 1998 1999]"
    assert lines[-1] == "]" and len(lines) == 9
    np.testing.assert_array_equal(out, x)
    # Threshold 0 disables summarising.
    err, _ = run_print(np.arange(1500, dtype=np.int32), capfd, summarise_threshold=0,
                       max_line_width=0)
    assert "..." not in err and err.count("\n") == 1


def test_nested_float16_alignment(capfd):
    x = (np.arange(8, dtype=np.float16) - 3).reshape(2, 2, 2)
    err, out = run_print(x, capfd, name="h", float_format="fixed", digits=4)
    assert err == ("print_h: [\n"
                   " [\n  [-3.000 -2.000]\n  [-1.000  0.000]\n ]\n"
                   " [\n  [ 1.000  2.000]\n  [ 3.000  4.000]\n ]\n"
                   "]\n")
    np.testing.assert_array_equal(out, x)


def test_auto_switches_to_scientific_and_nonfinite(capfd):
    err, _ = run_print(np.array([1e-6, 2.0, -3e5], np.float32), capfd, name="a")
    assert err == "print_a: [ 1.0000000e-06  2.0000000e+00 -3.0000000e+05]\n"
    err, _ = run_print(np.array([np.nan, np.inf, -1.5], np.float32), capfd, name="n")
    assert err == "print_n: [       nan        inf -1.5000000]\n"
    err, _ = run_print(np.array([0.5, 10.25], np.float32), capfd, name="n", float_format="none",
                       digits=3)
    assert err == "print_n: [0.5 10.2]\n"


def test_line_splitting(capfd):
    x = np.linspace(0, 1, 30, dtype=np.float32)
    err, _ = run_print(x, capfd, name="lin")
    lines = err.splitlines()
    assert len(lines) == 5
    assert all(len(line) <= 75 for line in lines)
    assert all(line.startswith("  ") for line in lines[1:])
    assert lines[-1].endswith("1.0000000]")
    values = [float(tok) for tok in err.replace("print_lin:", "").replace("[", "").replace(
        "]", "").split()]
    np.testing.assert_allclose(values, x, atol=5e-8)


def test_prints_every_run(capfd):
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(np.array([1.0], np.float32), name="v")
        ops.print_tensor(v, "step")
        popxl.ops.var_updates.accumulate_(v, popxl.constant(np.array([1.0], np.float32)))
    capfd.readouterr()
    with popxl.Session(ir, "ipu_model") as session:
        session.run()
        session.run()
    err = capfd.readouterr().err
    assert err == "step: [1.0000000]\nstep: [2.0000000]\n"


def test_graph_structure():
    ir = popxl.Ir()
    g = ir.main_graph
    with g:
        a = popxl.variable(1)
        c = ops.print_tensor(a)
        assert len(g.tensors) == 2 and len(g.variables) == 1
        assert c.producer.type == "PrintTensor" and c.producer.attrs["title"] == "print_" + a.name
        assert c.shape == a.shape and c.dtype == a.dtype


def test_bad_inputs():
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.zeros(3, np.float32), name="a")
        with pytest.raises(ValueError, match="Parameter separator must be 1 character exactly"):
            ops.print_tensor(a, separator=", ")
        with pytest.raises(ValueError, match="Parameter open_bracket must be 1 character"):
            ops.print_tensor(a, open_bracket="")
        with pytest.raises(KeyError, match="float_format must be one of"):
            ops.print_tensor(a, float_format="engineering")
        with pytest.raises(ValueError, match="print_tensor: edge_items must be >= 0"):
            ops.print_tensor(a, edge_items=-1)
        with pytest.raises(TypeError, match="print_tensor: digits must be an int"):
            ops.print_tensor(a, digits=2.5)
        with pytest.raises(TypeError, match="print_tensor: argument 't' must be a Tensor"):
            ops.print_tensor(np.zeros(3))
        with pytest.raises(TypeError, match="title must be a str"):
            ops.print_tensor(a, title=3)


def test_autodiff_prints_gradient(capfd):
    # Mirrors PopXL's test_autodiff_hassideeffect_op.
    def module(x):
        x = ops.print_tensor(x, print_self=True, print_gradient=True)
        return x @ x

    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.arange(4), popxl.float32, "x")
        graph = ir.create_graph(module, x)
        dgraph = popxl.transforms.autodiff(graph)
        fwd_call = ops.call_with_info(graph, x)
        y, *_ = fwd_call.outputs
        (dx,) = ops.call(dgraph.graph, y, inputs_dict=dgraph.inputs_dict(fwd_call))
        dx_d2h = popxl.d2h_stream(dx.shape, dx.dtype, name="dx_stream")
        ops.host_store(dx_d2h, dx)
    capfd.readouterr()
    with popxl.Session(ir, "ipu_model") as session:
        got = session.run()[dx_d2h]
    err = capfd.readouterr().err
    assert "print_x: [0.0000000 1.0000000 2.0000000 3.0000000]" in err
    # d(x.x)/dx = 2x, scaled by the provided gradient y = x.x = 14.
    assert "print_x_gradient: [ 0.000000 28.000000 56.000000 84.000000]" in err
    np.testing.assert_allclose(got, 28.0 * np.arange(4))
