"""The IPU model's accounting of remote memory and IO tiles: remote
variables take no tile memory but their landing pads (live during each
load or store), a MultiExchange pays
one sync, exchanges on IO tiles overlap the compute that follows."""
import numpy as np

import ipuxl as popxl
import ipuxl.ops as ops
from ipuxl.profile import IpuModel, profile_ir

N = 4
SHAPE = (256, 256)  # 256 KiB of float32 per weight


def _layers(remote: bool):
    """N layers x @ W_k, the weights as variables or as remote variables
    of one buffer, loaded one at a time."""
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence(True):
        xs = popxl.h2d_stream((16, SHAPE[0]), popxl.float32, "x")
        x = ops.host_load(xs)
        ws = [np.full(SHAPE, 0.001 * (k + 1), np.float32) for k in range(N)]
        if remote:
            rb = popxl.remote_buffer(SHAPE, popxl.float32, N)
            for k in range(N):
                popxl.remote_variable(ws[k], rb, k, name=f"w{k}")
            for k in range(N):
                x = x @ ops.remote_load(rb, k)
        else:
            for k in range(N):
                x = x @ popxl.variable(ws[k], name=f"w{k}")
        ys = popxl.d2h_stream(x.shape, x.dtype, "y")
        ops.host_store(ys, x)
    return ir, xs, ys


def test_remote_variables_take_only_a_landing_pad():
    on_chip = profile_ir(_layers(False)[0], "ipu2")
    off_chip = profile_ir(_layers(True)[0], "ipu2")
    w_bytes = SHAPE[0] * SHAPE[1] * 4
    assert on_chip.totals["variables"] >= N * w_bytes
    # One pad of one entry instead of N weights.
    (rb,) = off_chip.remote_buffers
    assert rb["pads"] == 1 and rb["pad_bytes"] == w_bytes and rb["loads"] == N
    assert rb["streaming_bytes"] == N * w_bytes and rb["entries"] == N
    # The pad is written and read within each load (entry -> pad -> the
    # loaded tensor): live during the load step, with the loaded tensor,
    # not always live.
    assert off_chip.totals["variables"] == 0
    live = dict(zip(off_chip.steps["label"], off_chip.steps["live_bytes"]))
    assert live["remote_load"] >= 2 * w_bytes
    assert live["host_load"] < w_bytes
    assert "Streaming Memory (off chip): 1,048,576 B" in off_chip.summary()
    # ... and the same numbers when run.
    outs = []
    for remote in (False, True):
        ir, xs, ys = _layers(remote)
        with popxl.Session(ir, "ipu_model") as s:
            outs.append(s.run({xs: np.ones((16, SHAPE[0]), np.float32)})[ys])
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-6)


def _two_loads(merge: bool, store_too: bool = False):
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence(True):
        a_rb = popxl.remote_buffer((1024,), popxl.float32, 1)
        b_rb = popxl.remote_buffer((1024,), popxl.float32, 1)
        ctx = popxl.transforms.merge_exchange() if merge else popxl.in_sequence(True)
        with ctx:
            a = ops.remote_load(a_rb, 0)
            b = ops.remote_load(b_rb, 0)
            if store_too:
                ops.remote_store(a_rb, 0, popxl.variable(np.zeros(1024, np.float32)))
        ys = popxl.d2h_stream((1024,), popxl.float32, "y")
        ops.host_store(ys, a + b)
    return profile_ir(ir, "ipu2")


def test_a_multi_exchange_pays_one_sync():
    apart, merged = _two_loads(False), _two_loads(True)
    sync = 500  # ipu2 sync_global_cycles (cpp/model/target.hpp)
    assert apart.cycles - merged.cycles == sync
    assert [b["pads"] for b in merged.remote_buffers] == [1, 1]
    # A buffer loaded and stored in one exchange needs two landing pads.
    both = _two_loads(True, store_too=True)
    assert [b["pads"] for b in both.remote_buffers] == [2, 1]


def _io_program(io: bool):
    """A host load and a remote store on IO tiles, then a matmul that does
    not need them: on IO tiles they overlap it."""
    ir = popxl.Ir()
    if io:
        ir._pb_ir.getSessionOptions().numIOTiles = 32
    with ir.main_graph, popxl.in_sequence(True):
        xs = popxl.h2d_stream((1 << 16,), popxl.float32, "x")
        rb = popxl.remote_buffer((1 << 16,), popxl.float32, 1)
        w = popxl.variable(np.ones((512, 512), np.float32))
        ctx = popxl.transforms.io_tile_exchange() if io else popxl.in_sequence(True)
        with ctx:
            x = ops.host_load(xs)
        with (popxl.transforms.io_tile_exchange() if io else popxl.in_sequence(True)):
            ops.remote_store(rb, 0, x)
        y = w @ w
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
    return profile_ir(ir, "ipu2")


def test_exchanges_on_io_tiles_overlap_compute():
    plain, io = _io_program(False), _io_program(True)
    assert io.target["num_io_tiles"] == 32 and plain.target["num_io_tiles"] == 0
    steps = io.steps
    total = sum(int(c) for c in steps["cycles"])
    # The IO steps run beside the matmul: the program is shorter than its steps.
    assert io.cycles < total
    assert sum(int(c) for c in plain.steps["cycles"]) == plain.cycles
    assert io.cycles < plain.cycles


def test_an_ipu_model_with_io_tiles_checks_the_count():
    ir = popxl.Ir()
    ir._pb_ir.getSessionOptions().numIOTiles = 32
    with ir.main_graph:
        with popxl.io_tiles():
            x = ops.host_load(popxl.h2d_stream((4,), popxl.float32))
        ops.host_store(popxl.d2h_stream((4,), popxl.float32), ops.io_tile_copy(x))
    p = profile_ir(ir, IpuModel(tiles_per_ipu=64))
    assert p.target["num_io_tiles"] == 32
    import pytest
    with pytest.raises(RuntimeError, match="Tiles per IPU 32 should exceed number of IO tiles 32"):
        profile_ir(ir, IpuModel(tiles_per_ipu=32))


class _Linear(popxl.Module):
    def build(self, x: popxl.Tensor, out_features: int) -> popxl.Tensor:
        self.W = popxl.graph_input((x.shape[-1], out_features), popxl.float32, "W")
        self.b = popxl.graph_input((out_features,), popxl.float32, "b")
        return x @ self.W + self.b


def _code_load_model(code_load: bool):
    """The public part of PopXL's test_remote_code_load.py: a Linear graph
    called once, its code loaded first (or not)."""
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.1, (16, 16)).astype(np.float32)
    b = np.zeros(16, np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        xs = popxl.h2d_stream((2, 16), popxl.float32, "x_stream")
        x = ops.host_load(xs, "x")
        W, B = popxl.variable(w, name="W"), popxl.variable(b, name="b")
        lin = _Linear()
        g = ir.create_graph(lin, x, out_features=16)
        with popxl.in_sequence():
            if code_load:
                ops.remote_code_load(g, destination="executable")
            (y,) = ops.call(g, x, inputs_dict={lin.W: W, lin.b: B})
        ys = popxl.d2h_stream((2, 16), popxl.float32, "y_stream")
        ops.host_store(ys, y)
    return ir, xs, ys, w, b


def test_remote_code_load_runs_and_moves_code():
    profiles = {}
    for code_load in (False, True):
        ir, xs, ys, w, b = _code_load_model(code_load)
        x = np.ones((2, 16), np.float32)
        with popxl.Session(ir, "ipu_model") as s:
            y = s.run({xs: x})[ys]
        np.testing.assert_allclose(y, x @ w + b, rtol=1e-6)
        profiles[code_load] = profile_ir(ir, "ipu2")
    plain, loaded = profiles[False], profiles[True]
    # One more host exchange: the code load, which costs cycles ...
    labels = list(loaded.steps["label"])
    assert len(labels) == len(plain.steps["label"]) + 1
    k = labels.index("remote_code_load")
    assert int(loaded.steps["cycles"][k]) > 500
    # ... and moves the graph's code out of always-live memory.
    assert loaded.loaded_code.sum() > 0 and plain.loaded_code.sum() == 0
    assert loaded.totals["controlCode"] < plain.totals["controlCode"]
