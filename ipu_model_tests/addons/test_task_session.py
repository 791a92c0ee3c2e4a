"""addons.TaskSession: checkpoints hold exactly the state's values (checked
with np.load), load restores them, missing keys are reported, steps are
counted, old checkpoints are rotated out."""
import json
import os

import numpy as np
import pytest

import ipuxl as popxl
import ipuxl.addons as addons
import ipuxl.ops as ops
from ipuxl.addons.layers import Linear


class TwoLayers(addons.Module):
    def __init__(self):
        super().__init__()
        self.l1 = Linear(3)
        self.l2 = Linear(2)

    def build(self, x):
        return self.l2(self.l1(x))


def build(seed):
    np.random.seed(seed)
    ir = popxl.Ir()
    with ir.main_graph:
        streams = addons.InputStreams(x=((4, 5), popxl.float32))
        outs = addons.OutputStreams(y=((4, 2), popxl.float32))
        x = ops.host_load(streams.x)
        facts, g = TwoLayers().create_graph(x)
        state = facts.init()
        (y,) = g.bind(state).call(x)
        ops.host_store(outs.y, y)
    return addons.TaskSession(streams, outs, state, 2, ir, "ipu_model")


def test_save_then_load_restores_state(tmp_path):
    s1 = build(0)
    x = np.random.default_rng(1).normal(size=(4, 5)).astype(np.float32)
    with s1:
        y1 = s1.run({s1.inputs.x: x})[s1.outputs.y]
        s1.save_checkpoint(str(tmp_path / "ck"))
        saved = s1.get_named_tensors_data().to_dict()
    assert s1.session_state["steps"] == 1
    files = sorted(os.listdir(tmp_path / "ck" / "model"))
    assert files == sorted(f"{k}.npz" for k in s1.state.keys_flat())
    for k, arr in saved.items():
        with np.load(tmp_path / "ck" / "model" / f"{k}.npz") as z:
            np.testing.assert_array_equal(z[k], arr)
    assert json.loads((tmp_path / "ck" / "session_info.json").read_text()) == {"steps": 1}

    s2 = build(5)   # different initial weights
    with s2:
        s2.load_checkpoint(str(tmp_path / "ck"), report_missing="error")
        y2 = s2.run({s2.inputs.x: x})[s2.outputs.y]
        for k, arr in s2.get_named_tensors_data().to_dict().items():
            np.testing.assert_array_equal(arr, saved[k])
    np.testing.assert_allclose(y2, y1, rtol=1e-6)
    assert s2.session_state == {"steps": 2}  # loaded 1, then one run


def test_missing_keys_and_session_file(tmp_path):
    s1 = build(0)
    with s1:
        s1.save_checkpoint(str(tmp_path / "ck"))
    os.remove(tmp_path / "ck" / "model" / "l2.weight.npz")
    s2 = build(1)
    with pytest.raises(ValueError, match="l2.weight"):
        s2.load_checkpoint(str(tmp_path / "ck"), report_missing="error")
    os.remove(tmp_path / "ck" / "session_info.json")
    s3 = build(1)
    s3.load_checkpoint(str(tmp_path / "ck"), report_missing="none")
    assert s3.session_state == {"steps": 0}
    with pytest.raises(ValueError):
        s3.load_checkpoint(str(tmp_path / "ck"), report_missing="loudly")


def test_rotation_dataloader_and_streams_from_iterables(tmp_path):
    s = build(0)
    for i in range(3):
        s.save_checkpoint(str(tmp_path / f"ck{i}"))
    assert not (tmp_path / "ck0").exists()   # max_checkpoints=2
    assert (tmp_path / "ck1").exists() and (tmp_path / "ck2").exists()

    class Loader:
        def __init__(self):
            self.pos = 7

        def save(self, filename):
            with open(filename, "w") as f:
                f.write(str(self.pos))

        def resume(self, filename):
            with open(filename) as f:
                self.pos = int(f.read())

    with pytest.raises(ValueError):
        s.dataloader = object()
    s.dataloader = Loader()
    s.add_session_state_info({"lr": 0.1})
    s.save_checkpoint(str(tmp_path / "ckd"))
    s2 = build(0)
    s2.dataloader = Loader()
    s2.dataloader.pos = 0
    s2.load_checkpoint(str(tmp_path / "ckd"), report_missing="none")
    assert s2.dataloader.pos == 7 and s2.session_state["lr"] == 0.1

    ir = s.ir
    plain = addons.TaskSession(list(s.inputs), list(s.outputs), s.state, 1, ir, "ipu_model")
    assert list(plain.inputs) == list(s.inputs)
