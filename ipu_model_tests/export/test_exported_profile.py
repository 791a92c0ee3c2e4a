"""The IPU model of an exported Poplar program (run on ipuxl's Poplar with
autoReport) beside ``Session.profile()`` of the original
(:mod:`ipuxl.export.profile_compare`).

What the two share is asserted exactly, tile by tile: the always-live
variables and constants (the export maps every variable and constant as
the Session's model does, and ipuxl's Poplar's liveness finds the same
tensors always live), the stack (both models read the figures of
``cpp/model/target.hpp``). The other categories are estimated by two
models of different granularity (the Session's per op, ipuxl's Poplar's
per vertex and edge of the PopLibs code the program calls), so for them
the tests check the comparison itself and keep the ratio table in the
test output; the table for MNIST and the transformer step is in
bench/results/2026-12-02-exported-profile.md.

Building needs a C++ compiler, so these tests are marked slow.
"""
import os

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.export.profile_compare import compare_rows, exported_profiles, format_rows
from poplar_roundtrip import main_ir_of_script
from repo_modules import ROOT, load

#: Categories the two models compute from the same data: equal on every tile.
SHARED = ("variables", "constants", "stack")


def _check(ir, tmp_path):
    want, got, summary = exported_profiles(ir, str(tmp_path / "exported"))
    rows = compare_rows(want, got, summary)
    print(format_rows(rows))
    for c in SHARED:
        np.testing.assert_array_equal(got.per_tile[c], want.per_tile[c], err_msg=c)
    return want, got, summary, {r["what"]: r for r in rows}


def _matmul_program():
    rng = np.random.default_rng(0)
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        x = ops.host_load(popxl.h2d_stream((16, 64), popxl.float32, name="x"), "x")
        w = popxl.variable(rng.normal(size=(64, 32)).astype(np.float32), name="w")
        b = popxl.variable(np.zeros(32, np.float32), name="b")
        y = ops.relu(x @ w + b)
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype, name="y"), y)
    return ir


@pytest.mark.slow
def test_variables_equal_tile_by_tile(tmp_path):
    want, got, _, rows = _check(_matmul_program(), tmp_path)
    # The weights are the program's only variables: 64*32 + 32 floats.
    assert want.per_tile["variables"].sum() == (64 * 32 + 32) * 4
    # The streamed input and the activations are not always live in either.
    assert got.per_tile["notAlwaysLive"].sum() > 0
    assert rows["cycles: main program, one run"]["exported"] > 0


@pytest.mark.slow
def test_mnist_training_step(tmp_path):
    mnist = load("examples/mnist_popxl.py")
    _check(mnist.build_train_ir(8, 0.1)[0], tmp_path)


@pytest.mark.slow
def test_transformer_step(tmp_path):
    tf = load("bench/transformer_step.py", "bench/_peer.py", "bench/_stats.py")
    peer = tf.IpuxlPeer(tf.make_weights("small", 0), "small", {})
    peer.session.__exit__(None, None, None)
    _check(peer.session._ir, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["basic_graph.py", "call_with_info.py", "repeat_graph_0.py"])
def test_user_guide_program(name, tmp_path):
    want, got, summary, rows = _check(
        main_ir_of_script(os.path.join(ROOT, "examples", "user_guide", name)), tmp_path)
    # Every Function of the Session's profile is a poplar::Function of the export.
    for g in want.functions():
        assert g["name"] in summary["function_graphs"], g["name"]
