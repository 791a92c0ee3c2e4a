"""addons.performance_utils: FLOP counts against hand counts (a matmul
costs 2*K multiply-adds per output element), op ids from 100 as in PopART,
repeat counts, replication, and the number format."""
import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.addons import performance_utils as pu


def test_matmul_and_elementwise_counts():
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence(True):
        y = popxl.constant(np.ones(4, np.float32)) @ popxl.constant(np.ones((4, 8), np.float32))
        s = popxl.constant(np.ones(4, np.float32)).T @ popxl.constant(np.ones(4, np.float32))
        c = popxl.constant(np.ones((10, 9), np.float32)) @ popxl.constant(np.ones((9, 5), np.float32))
        d = ops.matmul(popxl.constant(np.ones((3, 5, 10, 9), np.float32)),
                       popxl.constant(np.ones((3, 5, 9, 3), np.float32)))
        e = d + d
    b = pu.evaluate_FLOPs(ir.main_graph)
    # PopART numbers ops from 100; x.T is an op (101)
    assert b["MatMul"] == {100: 2 * 4 * 8, 102: 2 * 4, 103: 2 * 9 * 10 * 5,
                           104: 2 * 9 * 3 * 5 * 10 * 3}
    assert b["Add"] == {105: 3 * 5 * 10 * 3}
    assert b["TOT"] == sum(b["MatMul"].values()) + 450


def test_repeat_and_replication():
    ir = popxl.Ir()
    ir.replication_factor = 1
    with ir.main_graph:
        x = popxl.variable(np.ones((2, 3), np.float32))
        w = popxl.variable(np.ones((3, 3), np.float32))

        def body(a, w):
            return a @ w

        g = ir.create_graph(body, x, w)
        ops.repeat(g, 5, x, inputs_dict={g.inputs[1]: w})
    b = pu.evaluate_FLOPs(ir.main_graph)
    (key,) = b["MatMul"].keys()
    assert key.startswith("Repeat_") and key.endswith("body)") and "_subgraph" not in key
    assert b["MatMul"][key] == {next(iter(b["MatMul"][key])): 5 * 2 * 3 * 2 * 3}
    assert b["TOT"] == 5 * 36
    assert pu.total_FLOPs(ir) == 5 * 36


# the examples of popxl_addons' print_FLOPs docstring, plus the fixed units
@pytest.mark.parametrize("val,fmt,want", [(9072, "nearest3", "9.072E+03"), (8100, "nearest3", "8.100E+03"),
                                          (900, "nearest3", "0.900E+03"), (64, "nearest3", "64.000E+00"),
                                          (8, "nearest3", "8.000E+00"), (0, "nearest3", "0.000E+00"),
                                          (8100, "K", "8.100E+03"), (2.5e9, "G", "2.500E+09")])
def test_format(val, fmt, want):
    assert pu.format_flops_scientific(val, fmt) == want


def test_print(capsys):
    pu.print_FLOPs({"TOT": 100, "MatMul": {100: 60}, "Add": {101: 40}})
    out = capsys.readouterr().out
    assert "MatMul" in out and "60.0" in out and "1.000E+02" in out or "0.100E+03" in out
    pu.print_FLOPs({"TOT": 100, "MatMul": {100: 60}, "Add": {101: 40}}, mode="flat")
    assert "MatMul.100" in capsys.readouterr().out
    with pytest.raises(ValueError):
        pu.print_FLOPs({"TOT": 1}, mode="tree")
