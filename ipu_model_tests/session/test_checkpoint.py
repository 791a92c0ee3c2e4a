"""Checkpoints: round trip, atomic writes, mismatches reported, NamedTensors."""
import json
import os

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.checkpoint import CheckpointMismatch, read_checkpoint


def _program(shape_w=(3, 2)):
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.arange(np.prod(shape_w), dtype=np.float32).reshape(shape_w),
                           name="w")
        m = popxl.variable(np.zeros(shape_w, np.float16), name="momentum")
        step = popxl.variable(np.int32(0), name="step")
        ops.add_(w, 1.0)
        ops.add_(m, popxl.constant(np.ones(shape_w, np.float16)))
        ops.add_(step, popxl.constant(np.int32(1)))
    return ir, w, m, step


def test_round_trip_restores_every_variable(tmp_path):
    ir, w, m, step = _program()
    path = tmp_path / "ckpt.npz"
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        sess.run()
        sess.save_checkpoint(path)
        saved = sess.get_tensors_data([w, m, step])
        sess.run()
        sess.load_checkpoint(path)
        got = sess.get_tensors_data([w, m, step])
    for t in (w, m, step):
        np.testing.assert_array_equal(got[t], saved[t])
        assert got[t].dtype == saved[t].dtype
    # Plain NumPy reads it: positional entries, named by the JSON index.
    with np.load(path) as z:
        index = json.loads(bytes(z["__ipuxl_checkpoint__"]).decode())
        entry = {t["name"]: t["entry"] for t in index["tensors"]}["w"]
        np.testing.assert_array_equal(z[entry], saved[w])
    assert set(read_checkpoint(path)) == {"w", "momentum", "step"}


def test_mismatches_are_listed_and_nothing_is_written(tmp_path):
    ir, w, m, step = _program((3, 2))
    path = tmp_path / "ckpt.npz"
    with popxl.Session(ir, "ipu_model") as sess:
        sess.save_checkpoint(path)
    ir2, w2, m2, step2 = _program((2, 3))
    with popxl.Session(ir2, "ipu_model") as sess2:
        before = sess2.get_tensor_data(w2)
        with pytest.raises(CheckpointMismatch, match=r"'momentum': checkpoint has shape \(3, 2\)"
                                                     r".*'w': checkpoint has shape"):
            sess2.load_checkpoint(path)
        np.testing.assert_array_equal(sess2.get_tensor_data(w2), before)
        sess2.save_checkpoint(tmp_path / "partial.npz", {"w": w2})
        with pytest.raises(CheckpointMismatch, match="'momentum' is not in the checkpoint"):
            sess2.load_checkpoint(tmp_path / "partial.npz")
        sess2.load_checkpoint(tmp_path / "partial.npz", strict=False)


def test_interrupted_save_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    ir, w, m, step = _program()
    path = tmp_path / "ckpt.npz"
    with popxl.Session(ir, "ipu_model") as sess:
        sess.save_checkpoint(path)
        first = read_checkpoint(path)["w"]
        sess.run()

        def dies(*a, **k):
            raise KeyboardInterrupt  # killed in the middle of writing

        monkeypatch.setattr(np, "savez", dies)
        with pytest.raises(KeyboardInterrupt):
            sess.save_checkpoint(path)
    np.testing.assert_array_equal(read_checkpoint(path)["w"], first)
    assert os.listdir(tmp_path) == ["ckpt.npz"]  # no temporary left behind


def test_named_tensors_tree(tmp_path):
    from ipuxl.addons import NamedTensors

    ir, w, m, step = _program()
    tree = NamedTensors.from_dict({"layer.weight": w, "opt.momentum": m})
    path = tmp_path / "tree.npz"
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        sess.save_checkpoint(path, tree)
        assert set(read_checkpoint(path)) == {"layer.weight", "opt.momentum"}
        saved = sess.get_tensor_data(w)
        sess.run()
        sess.load_checkpoint(path, tree)
        np.testing.assert_array_equal(sess.get_tensor_data(w), saved)


def test_not_a_checkpoint(tmp_path):
    ir, *_ = _program()
    np.savez(tmp_path / "other.npz", a=np.zeros(2))
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.raises(ValueError, match="not an ipuxl checkpoint"):
            sess.load_checkpoint(tmp_path / "other.npz")
